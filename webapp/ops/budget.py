"""Warn when the database's max_connections leaves too little room for the fleet."""

import logging

log = logging.getLogger("soloist.budget")

BUDGET_SQL = """
SELECT current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'),
       (SELECT count(*) FROM pg_stat_activity
        WHERE application_name LIKE 'soloist:%%' AND datname = current_database())
"""


SCHEDULER_CONNECTIONS = 1  # the ticks' own pool (webapp.scheduler_app)


def per_process(pool_size: int, max_overflow: int, revalidation: int = 1) -> int:
    """Return the connections one worker process may open.

    Its lock session, the scheduler's, the web pool, and the public pages' 304s' own
    (webapp.revalidation; 0 with DB_REVALIDATION_CONNECTION=false).
    """
    return 1 + SCHEDULER_CONNECTIONS + revalidation + pool_size + max_overflow


def connections_per_process(config) -> tuple[int, int, int]:
    """Return (pool size, overflow, revalidation connections) of a worker, from its config."""
    return (config["DB_POOL_SIZE"], config["DB_MAX_OVERFLOW"],
            int(config["DB_REVALIDATION_CONNECTION"]))


def check_connection_budget(locks, pool_size: int, max_overflow: int,
                            revalidation: int = 1) -> str | None:
    """Log (and return) a warning when the fleet could run out of connections."""
    limit, reserved, in_use, processes = locks.execute(BUDGET_SQL)[0]
    usable = limit - reserved
    need = per_process(pool_size, max_overflow, revalidation)
    fleet = max(processes, 1) * need
    message = None
    if usable - in_use < need:
        message = (f"only {usable - in_use} of {usable} database connections are free and one "
                   f"more worker needs up to {need}")
    elif fleet > usable:
        message = (f"{processes} worker processes x (1 lock + 1 scheduler + {revalidation} "
                   f"revalidation + {pool_size} pool + {max_overflow} overflow) = {fleet} "
                   f"connections at peak, but max_connections leaves {usable}")
    if message:
        log.warning("connection budget: %s; lower DB_POOL_SIZE/DB_MAX_OVERFLOW or "
                    "WEB_CONCURRENCY, or use a bigger database plan", message)
    return message
