"""Soloist: scheduled work that runs exactly once across a fleet of Flask instances."""

import logging
from pathlib import Path

from flask import Flask

from . import headers, limits, timefmt
from .config import check_production_config, instance_path, load_config
from .db import enable_sqlite_pragmas, is_sqlite_url, pg_connect_args, watch_connections
from .extensions import db
from .site import compression, urls

ROOT = Path(__file__).resolve().parent.parent


def create_app(config: dict | None = None) -> Flask:
    """Create the app; start no threads and touch no database."""
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
    register_extensions(app)
    register_blueprints(app)
    urls.init_app(app)
    limits.init_app(app)
    headers.init_app(app)
    timefmt.init_app(app)
    compression.init_app(app)  # public text gzipped (after the views' own hooks)
    register_commands(app)
    register_scheduler(app, config)
    return app


def configure_database(app: Flask) -> None:
    """Default to a SQLite file in the instance folder; size the pool for PostgreSQL.

    The scheduler's ticks (DB_ROLE "sched") always connect directly (LOCK_DATABASE_URL,
    else DATABASE_URL), never through DATABASE_CONNECTION_POOL_URL: their statements need
    the server-side timeouts a transaction pooler refuses, and an eviction must reach them.
    """
    if not app.config.get("SQLALCHEMY_DATABASE_URI"):
        Path(app.instance_path).mkdir(parents=True, exist_ok=True)
        path = Path(app.instance_path) / "soloist.db"
        app.config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{path}"
    if not app.config.get("LOCK_DATABASE_URL"):
        app.config["LOCK_DATABASE_URL"] = app.config["SQLALCHEMY_DATABASE_URI"]
    app.config.setdefault("DB_ROLE", "web")
    sched = app.config["DB_ROLE"] == "sched"
    if sched:
        app.config["SQLALCHEMY_DATABASE_URI"] = app.config["LOCK_DATABASE_URL"]
        app.config["DB_WEB_VIA_POOLER"] = False
    uri = app.config["SQLALCHEMY_DATABASE_URI"]
    options = dict(app.config.get("SQLALCHEMY_ENGINE_OPTIONS") or {})
    # a logged database error must not carry its statement's values (webhook secrets, hashes)
    options.setdefault("hide_parameters", True)
    if not is_sqlite_url(uri):
        # the scheduler thread uses one connection at a time; the web pool is sized by ops
        plugin = app.config["DB_ROLE"] == "plugin"
        pool = 1 if sched else app.config["PLUGIN_DB_POOL_SIZE"] if plugin else \
            app.config["DB_POOL_SIZE"]
        options.setdefault("pool_size", pool)
        options.setdefault("max_overflow", 0 if sched or plugin else app.config["DB_MAX_OVERFLOW"])
        options.setdefault("pool_pre_ping", True)
        # a request waits for a connection no longer than half the stale bound: past it, 503
        wait = max(1.0, app.config["LEADER_STALE_SECONDS"] / 2)
        options.setdefault("pool_timeout", min(5.0, wait) if sched else min(10.0, wait))
        options.setdefault("connect_args", pg_connect_args(app.config, app.config["DB_ROLE"]))
    else:
        options.setdefault("connect_args", {"timeout": 15})
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = options
    app.config.setdefault("SQLALCHEMY_TRACK_MODIFICATIONS", False)


def register_extensions(app: Flask) -> None:
    """Bind the database to the app (migrations bind when they run: cli.migrations)."""
    from . import models  # noqa: F401  (register the tables with the metadata)

    db.init_app(app)
    with app.app_context():
        if is_sqlite_url(app.config["SQLALCHEMY_DATABASE_URI"]):
            enable_sqlite_pragmas(db.engine)
        else:
            watch_connections(db.engine, app.config["INSTANCE_NAME"], app.config["DB_ROLE"])


NAV = [
    ("dashboard.index", "Dashboard", "viewer"),
    ("posts.index", "Posts", "editor"),
    ("calendar.index", "Calendar", "editor"),
    ("timers.index", "Timers", "editor"),
    ("plugins.index", "Plugins", "editor"),
    ("media.index", "Media", "editor"),
    ("status.index", "Status", "viewer"),
    ("webhooks.index", "Webhooks", "admin"),
    ("users.index", "Users", "admin"),
    ("audit.index", "Audit", "admin"),
    ("site_settings.edit", "Site settings", "admin"),
]


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
    media.init_app(app)  # uploads may be larger than other forms
    site.init_app(app)  # readers' matching conditional requests: 304 before Flask runs
    media_files.init_app(app)  # files by content address: 304 and 200 before Flask runs

    @app.context_processor
    def navigation() -> dict:
        items = [item for item in NAV if item[0] in app.view_functions]
        return {"nav_items": items}


def register_commands(app: Flask) -> None:
    """Add Soloist's flask commands."""
    from . import cli

    cli.init_app(app)


def register_scheduler(app: Flask, config: dict | None = None) -> None:
    """Start the scheduler under `flask run` only; gunicorn starts it after fork."""
    from .scheduling import process

    logging.getLogger("soloist").setLevel(logging.INFO)
    if app.config["DB_ROLE"] == "web":
        process.init_app(app, lambda: scheduler_app(config), lambda: plugin_app(config))


def scheduler_app(config: dict | None = None) -> Flask:
    """Create the scheduler's own app: the same settings, its own small pool.

    Its connections (soloist-sched:<instance>:<pid>) never wait behind web requests.
    """
    return create_app({**(config or {}), "DB_ROLE": "sched"})


def plugin_app(config: dict | None = None) -> Flask:
    """Create the app plugin work runs in (timer runs, hooks, webhook sends): its own small
    pool (PLUGIN_DB_POOL_SIZE, soloist-plugin:<instance>:<pid>), used on the plugins key's
    leader only, so plugin code never takes the web pool's connections."""
    return create_app({**(config or {}), "DB_ROLE": "plugin"})
