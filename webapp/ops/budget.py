"""The connection budget: what a fleet needs of max_connections, and what it uses now.

One worker per instance (its candidate, webapp.leadership.local) holds a lock session;
the scheduler's own connection is open only on a worker that leads a key (two keys: two
in the whole fleet at most); every worker has its web pool and, unless switched off, the
public pages' revalidation connection. Behind a transaction pooler
(DATABASE_CONNECTION_POOL_URL) the web pools and revalidation connections are the
pooler's clients, and the server sees only the pooler's own pool.

    direct:        N x (1 + W x (DB_POOL_SIZE + DB_MAX_OVERFLOW + revalidation)) + 2
                   + PLUGIN_DB_POOL_SIZE (plugin work's pool, on the plugins leader only)
    behind pooler: N x 1 + 2 + the pooler's pool (PgBouncer's default_pool_size)
"""

import logging
from dataclasses import dataclass

from ..db import parse_identity_role

log = logging.getLogger("soloist.budget")

SCHEDULER_CONNECTIONS = 2  # the ticks' own connection, one per leading worker (two keys)
PGBOUNCER_DEFAULT_POOL = 20  # PgBouncer's default_pool_size, per database and user

LIMITS_SQL = """
SELECT current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int
"""

# every client connection to the server, by application_name (soloist's say whose) on this
# database; connections to other databases count, as others
ACTIVITY_SQL = """
SELECT CASE WHEN datname = current_database() THEN coalesce(application_name, '') END,
       count(*)
FROM pg_stat_activity WHERE backend_type = 'client backend'
GROUP BY 1
"""


@dataclass(frozen=True)
class Fleet:
    """A fleet's shape: instances, workers each, and each worker's pool."""

    instances: int
    workers: int
    pool_size: int = 3
    max_overflow: int = 1
    revalidation: int = 1
    pooler_pool: int | None = None  # the pooler's server connections; None: no pooler
    plugin_pool: int = 2  # plugin work's pool, on the plugins key's leader only

    @property
    def lock(self) -> int:
        return self.instances

    @property
    def scheduler(self) -> int:
        return min(SCHEDULER_CONNECTIONS, self.instances)

    @property
    def web(self) -> int:
        """The web pools and revalidation connections the server sees."""
        if self.pooler_pool is not None:
            return self.pooler_pool
        return self.instances * self.workers * (
            self.pool_size + self.max_overflow + self.revalidation) + self.plugin_pool

    @property
    def peak(self) -> int:
        return self.lock + self.scheduler + self.web

    @property
    def idle(self) -> int:
        """What an idle fleet holds open: the candidates' lock sessions and the leaders'."""
        return self.lock + self.scheduler

    def resized(self, instances: int) -> "Fleet":
        """Return the same shape with another number of instances."""
        return Fleet(instances, self.workers, self.pool_size, self.max_overflow,
                     self.revalidation, self.pooler_pool, self.plugin_pool)

    def per_instance(self) -> int:
        """What one more instance adds at peak."""
        if self.pooler_pool is not None:
            return 1
        return 1 + self.workers * (self.pool_size + self.max_overflow + self.revalidation)

    def most_instances(self, usable: int) -> int:
        """Return the most instances of this shape that fit in usable connections."""
        count = 0
        while count < 10_000 and self.resized(count + 1).peak <= usable:
            count += 1
        return count


def fleet_from_config(config, instances: int, workers: int | None = None) -> Fleet:
    """Return a fleet of instances shaped as this process's settings say."""
    pooled = config["DB_WEB_VIA_POOLER"]
    return Fleet(instances, workers or config["WEB_CONCURRENCY"], config["DB_POOL_SIZE"],
                 config["DB_MAX_OVERFLOW"], int(config["DB_REVALIDATION_CONNECTION"]),
                 PGBOUNCER_DEFAULT_POOL if pooled else None, config["PLUGIN_DB_POOL_SIZE"])


@dataclass(frozen=True)
class Usage:
    """The server's connections now, by soloist instance and role, against its limit."""

    max_connections: int
    reserved: int
    by_instance: dict[str, dict[str, int]]  # instance -> role ("lock", "web", ...) -> count
    other: int  # connections that are not soloist's (psql, a pooler, other apps)

    @property
    def usable(self) -> int:
        return self.max_connections - self.reserved

    @property
    def in_use(self) -> int:
        return self.other + sum(sum(roles.values()) for roles in self.by_instance.values())

    @property
    def free(self) -> int:
        return self.usable - self.in_use


def usage(execute) -> Usage:
    """Read the server's connections by instance and role (execute runs one statement)."""
    limit, reserved = execute(LIMITS_SQL)[0]
    by_instance: dict[str, dict[str, int]] = {}
    other = 0
    for name, count in execute(ACTIVITY_SQL):
        found = parse_identity_role(name or "")
        if found is None:
            other += count
            continue
        role, instance = found
        roles = by_instance.setdefault(instance, {})
        roles[role] = roles.get(role, 0) + count
    return Usage(limit, reserved, dict(sorted(by_instance.items())), other)


def scale_up_warning(now: Usage, fleet: Fleet) -> str | None:
    """Say whether one more instance of fleet's shape would not fit at peak (None: it fits)."""
    bigger = fleet.resized(max(len(now.by_instance), fleet.instances) + 1)
    if bigger.peak + now.other <= now.usable:
        return None
    return (f"one more instance would not fit: {bigger.instances} instances x "
            f"{bigger.workers} workers need up to {bigger.peak} connections at peak "
            f"(+{now.other} others now), and max_connections leaves {now.usable}")


def check_connection_budget(locks, config) -> str | None:
    """Log (and return) a warning when the fleet, or its next instance, could run out of
    connections (the candidate checks once, when it first connects)."""
    now = usage(locks.execute)
    fleet = fleet_from_config(config, max(len(now.by_instance), 1))
    message = None
    if fleet.peak + now.other > now.usable:
        message = (f"{fleet.instances} instances x {fleet.workers} workers need up to "
                   f"{fleet.peak} connections at peak, but max_connections leaves "
                   f"{now.usable} ({now.other} used by others)")
    else:
        message = scale_up_warning(now, fleet)
    if message:
        log.warning("connection budget: %s; lower DB_POOL_SIZE/DB_MAX_OVERFLOW or "
                    "WEB_CONCURRENCY, put PgBouncer in front (DATABASE_CONNECTION_POOL_URL), "
                    "or use a bigger database plan", message)
    return message


def fleet_connections(config) -> dict:
    """Read the server's connections by instance and role now, with the warning the status
    page shows when one more instance would not fit."""
    import sqlalchemy as sa

    from ..extensions import db

    now = usage(lambda sql: db.session.execute(sa.text(sql)).all())
    fleet = fleet_from_config(config, max(len(now.by_instance), 1))
    roles = sorted({role for roles in now.by_instance.values() for role in roles},
                   key=lambda r: (r != "lock", r != "sched", r))
    return {"usage": now, "roles": roles, "warning": scale_up_warning(now, fleet),
            "per_instance": fleet.per_instance()}
