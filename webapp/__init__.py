"""Soloist: scheduled work that runs exactly once across a fleet of Flask instances."""

import logging
import os
from pathlib import Path

from flask import Flask

from . import headers, limits, timefmt
from .config import check_production_config, load_config
from .db import engine_options, set_up_engine
from .extensions import db
from .site import compression, urls

ROOT = Path(__file__).resolve().parent.parent


def create_app(config: dict | None = None) -> Flask:
    """Create the app; start no threads and touch no database."""
    app = Flask(
        __name__,
        instance_path=os.environ.get("SOLOIST_INSTANCE_PATH") or str(ROOT / "instance"),
        template_folder=str(ROOT / "templates"),
        static_folder=str(ROOT / "static"),
    )
    app.config.update(load_config())
    app.config.update(config or {})
    check_production_config(app.config)
    configure_database(app)
    register_extensions(app)
    register_blueprints(app)
    urls.init_app(app)
    limits.init_app(app)
    headers.init_app(app)
    timefmt.init_app(app)
    compression.init_app(app)  # public text gzipped (after the views' own hooks)
    register_commands(app)
    register_scheduler(app)
    return app


def configure_database(app: Flask) -> None:
    """Default to a SQLite file in the instance folder; size the web pool for PostgreSQL.

    The scheduler's engines are its own, made after the fork (webapp.scheduling.engines).
    """
    if not app.config.get("SQLALCHEMY_DATABASE_URI"):
        Path(app.instance_path).mkdir(parents=True, exist_ok=True)
        path = Path(app.instance_path) / "soloist.db"
        app.config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{path}"
    if not app.config.get("LOCK_DATABASE_URL"):
        app.config["LOCK_DATABASE_URL"] = app.config["SQLALCHEMY_DATABASE_URI"]
    web = engine_options(app.config, app.config["SQLALCHEMY_DATABASE_URI"], "web",
                         app.config["DB_POOL_SIZE"], app.config["DB_MAX_OVERFLOW"])
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {
        **web, **(app.config.get("SQLALCHEMY_ENGINE_OPTIONS") or {})}
    app.config.setdefault("SQLALCHEMY_TRACK_MODIFICATIONS", False)


def register_extensions(app: Flask) -> None:
    """Bind the database to the app (migrations bind when they run: cli.migrations)."""
    from . import models  # noqa: F401  (register the tables with the metadata)

    db.init_app(app)
    with app.app_context():
        set_up_engine(db.engine, app.config["INSTANCE_NAME"], "web")


# the admin's menu, in order: each link is shown to the role its view requires (menu)
NAV = [
    ("dashboard.index", "Dashboard"),
    ("posts.index", "Posts"),
    ("calendar.index", "Calendar"),
    ("timers.index", "Timers"),
    ("plugins.index", "Plugins"),
    ("media.index", "Media"),
    ("status.index", "Status"),
    ("webhooks.index", "Webhooks"),
    ("users.index", "Users"),
    ("audit.index", "Audit"),
    ("site_settings.edit", "Site settings"),
]


def menu(app: Flask) -> list[tuple[str, str, str]]:
    """Return the admin's menu: (endpoint, label, the role its view declares with
    role_required) for each page in NAV."""
    from .accounts.security import required_role

    return [(endpoint, label, required_role(app.view_functions[endpoint]))
            for endpoint, label in NAV]


def register_blueprints(app: Flask) -> None:
    """Mount the web views, the error pages and the navigation."""
    from . import media as media_files
    from .accounts import security
    from .views import (
        api,
        audit,
        auth,
        calendar,
        dashboard,
        errors,
        favicon,
        freezes,
        media,
        metrics,
        passkeys,
        plugins,
        posts,
        previews,
        revisions,
        site,
        sitesettings,
        status,
        timers,
        two_factor,
        users,
        webhooks,
    )

    security.init_app(app)
    errors.init_app(app)
    for module in (site, auth, dashboard, status, freezes, api, posts, calendar, users, timers,
                   plugins, webhooks, metrics, audit, sitesettings, favicon, two_factor,
                   passkeys, previews, revisions, media):
        app.register_blueprint(module.bp)
    app.register_blueprint(media.files_bp)
    app.register_blueprint(status.health_bp)
    media.init_app(app)  # uploads may be larger than other forms
    site.init_app(app)  # readers' matching conditional requests: 304 before Flask runs
    media_files.init_app(app)  # files by content address: 304 and 200 before Flask runs

    app.jinja_env.globals["nav_items"] = menu(app)


def register_commands(app: Flask) -> None:
    """Add Soloist's flask commands."""
    from . import cli

    cli.init_app(app)


def register_scheduler(app: Flask) -> None:
    """Start the scheduler under `flask run` only; gunicorn starts it after fork."""
    from .scheduling import process

    logging.getLogger("soloist").setLevel(logging.INFO)
    process.init_app(app)

