"""The scheduler's own connections: made once per worker process, after the fork.

The ticks have one connection (soloist-sched:…) that never waits behind web requests. It
is made directly (LOCK_DATABASE_URL, else DATABASE_URL), never through
DATABASE_CONNECTION_POOL_URL: its statements need the server-side timeouts a transaction
pooler refuses, and an eviction must reach it. Plugin work (timer runs, hooks, webhook
sends) has a small pool of its own (PLUGIN_DB_POOL_SIZE, soloist-plugin:…), through the
pooler when one is set and used on the plugins key's leader only, so plugin code never
takes the web pool's connections. SQLite mode is one host: plugin work shares the web
app's file.
"""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy as sa
from flask import Flask
from sqlalchemy.pool import QueuePool

from ..db import engine_options, is_sqlite_url, set_up_engine
from ..extensions import db

TICKS_WAIT = 5.0  # longest a tick waits for its connection: the next tick tries again


@dataclass(frozen=True)
class Engines:
    """The engines a scheduler works on; None: the app's own pool (a test's scheduler)."""

    ticks: sa.Engine | None = None
    plugins: sa.Engine | None = None

    def close(self, idle_only: bool = False) -> None:
        """Close the engines' connections (idle_only: only an engine none of whose
        connections is in use, as for a worker that leads nothing)."""
        for engine in (self.ticks, self.plugins):
            idle = isinstance(engine.pool, QueuePool) and engine.pool.checkedin() if engine else 0
            if engine is not None and (not idle_only or idle):
                engine.dispose()


def build(config: Mapping) -> Engines:
    """Make this process's scheduler engines from the app's settings (connecting to nothing)."""
    ticks = _engine(config, config["LOCK_DATABASE_URL"], "sched", 1, TICKS_WAIT)
    if is_sqlite_url(config["SQLALCHEMY_DATABASE_URI"]):
        return Engines(ticks)
    return Engines(ticks, _engine(config, config["SQLALCHEMY_DATABASE_URI"], "plugin",
                                  config["PLUGIN_DB_POOL_SIZE"]))


def _engine(config: Mapping, url: str, role: str, pool_size: int,
            wait_cap: float = 10.0) -> sa.Engine:
    engine = sa.create_engine(url, **engine_options(config, url, role, pool_size, 0, wait_cap))
    set_up_engine(engine, config["INSTANCE_NAME"], role)
    return engine


@contextmanager
def working_on(app: Flask, engine: sa.Engine | None) -> Iterator[None]:
    """Run the block in a new app context whose db.session uses engine (None: the app's own
    pool); the session is closed at the end."""
    with app.app_context():
        if engine is not None:
            db.session.registry.set(db.session.session_factory(bind=engine))
        try:
            yield
        finally:
            db.session.remove()
