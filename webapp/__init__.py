"""Soloist: scheduled work that runs exactly once across a fleet of Flask instances."""

import logging
from pathlib import Path

from flask import Flask

from . import headers, limits, timefmt
from .config import check_production_config, instance_path, load_config
from .db import engine_options, set_up_engine
from .extensions import csrf, db, login_manager
from .site import compression, urls

ROOT = Path(__file__).resolve().parent.parent


def create_app(config: dict | None = None) -> Flask:
    """Create the app; start no threads and touch no database.

    The table of contents: every extension, blueprint and WSGI wrapper, in the order they
    are added.
    """
    # imported here, not above: gunicorn's master imports webapp.config before it sets
    # PROMETHEUS_MULTIPROC_DIR, which the views' metrics library reads as it is imported
    from . import cli, models  # noqa: F401  (models: the tables, with the metadata)
    from . import media as media_files
    from .accounts import security
    from .scheduling import process
    from .site import revalidation
    from .views import (
        api,
        audit,
        auth,
        autosaves,
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
        releases,
        revisions,
        site,
        sitesettings,
        status,
        timers,
        two_factor,
        users,
        webhooks,
    )

    app = Flask(
        __name__,
        instance_path=instance_path(),
        template_folder=str(ROOT / "templates"),
        static_folder=str(ROOT / "static"),
    )
    app.config.update(load_config())
    app.config.update(config or {})
    check_production_config(app.config)
    configure_database(app)
    db.init_app(app)
    with app.app_context():
        set_up_engine(db.engine, app.config["INSTANCE_NAME"], "web")
    login_manager.init_app(app)
    csrf.init_app(app)
    security.init_app(app)  # sign-in pages, session cookies, password and 2FA prompts
    security.trust_proxy_hops(app)  # WSGI: the client's address from the router's headers
    errors.init_app(app)  # error pages, and ids in URLs bounded before any route exists
    for bp in (site.bp, auth.bp, dashboard.bp, status.bp, status.health_bp, freezes.bp, api.bp,
               posts.bp, calendar.bp, users.bp, timers.bp, plugins.bp, webhooks.bp, metrics.bp,
               audit.bp, sitesettings.bp, favicon.bp, two_factor.bp, passkeys.bp, previews.bp,
               revisions.bp, releases.bp, media.bp, media.files_bp, autosaves.bp):
        app.register_blueprint(bp)
    app.jinja_env.globals["nav_items"] = menu(app)
    media.init_app(app)  # uploads may be larger than other forms
    revalidation.init_app(app)  # the public pages' 304s read on a connection of their own
    # WSGI wrappers: each wraps those added before it, so the last sees a request first.
    # Files by content address come before the site's pages: an image (immutable, several
    # to a page) is answered before the page layers open an app context to look at it.
    site.init_app(app)  # WSGI: readers' matching conditional requests, 304 before Flask runs
    media_files.init_app(app)  # WSGI: files by content address, 304 and 200 before Flask runs
    urls.init_app(app)
    limits.init_app(app)  # WSGI, outermost: chunked bodies over the limit refused unread
    headers.init_app(app)
    timefmt.init_app(app)
    compression.init_app(app)  # public text gzipped (after the views' own hooks)
    cli.init_app(app)
    logging.getLogger("soloist").setLevel(logging.INFO)
    process.init_app(app)  # the scheduler under `flask run` only; gunicorn starts it after fork
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
