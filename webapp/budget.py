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


def per_process(pool_size: int, max_overflow: int) -> int:
    """Return the connections one worker process may open: lock, scheduler, web pool."""
    return 1 + SCHEDULER_CONNECTIONS + pool_size + max_overflow


def check_connection_budget(locks, pool_size: int, max_overflow: int) -> str | None:
    """Log (and return) a warning when the fleet could run out of connections."""
    limit, reserved, in_use, processes = locks.execute(BUDGET_SQL)[0]
    usable = limit - reserved
    need = per_process(pool_size, max_overflow)
    fleet = max(processes, 1) * need
    message = None
    if usable - in_use < need:
        message = (f"only {usable - in_use} of {usable} database connections are free and one "
                   f"more worker needs up to {need}")
    elif fleet > usable:
        message = (f"{processes} worker processes x (1 lock + 1 scheduler + {pool_size} pool + "
                   f"{max_overflow} "
                   f"overflow) = {fleet} connections at peak, but max_connections leaves "
                   f"{usable}")
    if message:
        log.warning("connection budget: %s; lower DB_POOL_SIZE/DB_MAX_OVERFLOW or "
                    "WEB_CONCURRENCY, or use a bigger database plan", message)
    return message
