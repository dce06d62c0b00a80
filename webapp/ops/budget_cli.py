"""`flask --app webapp budget`: the connections a fleet needs, with and without a pooler."""

import click
from flask import current_app
from flask.cli import with_appcontext

from .budget import PGBOUNCER_DEFAULT_POOL, Fleet


@click.command("budget")
@with_appcontext
@click.option("--instances", type=click.IntRange(1, 10_000), default=2, show_default=True,
              help="Instances (dynos, machines) of the app.")
@click.option("--workers", type=click.IntRange(1, 1_000), default=None,
              help="gunicorn workers per instance [default: WEB_CONCURRENCY].")
@click.option("--pool-size", type=click.IntRange(1, 1_000), default=None,
              help="Web pool per worker [default: DB_POOL_SIZE].")
@click.option("--max-overflow", type=click.IntRange(0, 1_000), default=None,
              help="Overflow per worker [default: DB_MAX_OVERFLOW].")
@click.option("--revalidation/--no-revalidation", default=None,
              help="Public 304s' own connection per worker [default: "
                   "DB_REVALIDATION_CONNECTION].")
@click.option("--plugin-pool", type=click.IntRange(1, 1_000), default=None,
              help="Plugin work's pool, on the plugins leader [default: PLUGIN_DB_POOL_SIZE].")
@click.option("--pooler-pool", type=click.IntRange(1, 10_000),
              default=PGBOUNCER_DEFAULT_POOL, show_default=True,
              help="Server connections of the pooler (PgBouncer's default_pool_size).")
@click.option("--max-connections", type=click.IntRange(1, 1_000_000), default=100,
              show_default=True, help="The server's max_connections (a plan's limit).")
@click.option("--reserved", type=click.IntRange(0, 1_000), default=3, show_default=True,
              help="superuser_reserved_connections.")
def budget_command(instances, workers, pool_size, max_overflow, revalidation, plugin_pool,
                   pooler_pool, max_connections, reserved) -> None:
    """Print the database connections a fleet needs at peak and idle, direct and behind
    a transaction pooler, and how many instances fit."""
    cfg = current_app.config
    shape = dict(
        workers=workers or cfg["WEB_CONCURRENCY"],
        pool_size=pool_size if pool_size is not None else cfg["DB_POOL_SIZE"],
        max_overflow=max_overflow if max_overflow is not None else cfg["DB_MAX_OVERFLOW"],
        revalidation=int(cfg["DB_REVALIDATION_CONNECTION"] if revalidation is None
                         else revalidation),
        plugin_pool=plugin_pool or cfg["PLUGIN_DB_POOL_SIZE"])
    direct = Fleet(instances, **shape)
    pooled = Fleet(instances, **shape, pooler_pool=pooler_pool)
    usable = max_connections - reserved
    each = shape["pool_size"] + shape["max_overflow"] + shape["revalidation"]
    rows = [
        ("lock sessions (1 per instance: its candidate)", direct.lock, pooled.lock),
        ("scheduler connections (the leaders', 2 at most)", direct.scheduler,
         pooled.scheduler),
        (f"web pools + revalidation ({shape['workers']} workers x {each}) + plugin pool "
         f"({shape['plugin_pool']})", direct.web,
         f"{pooled.web} (the pooler's)"),
        ("at peak", direct.peak, pooled.peak),
        ("idle", direct.idle, pooled.idle),
        (f"fits max_connections {max_connections} - {reserved} reserved = {usable}?",
         _fits(direct.peak, usable), _fits(pooled.peak, usable)),
        ("most instances of this shape that fit", direct.most_instances(usable),
         pooled.most_instances(usable)),
    ]
    click.echo(f"A fleet of {instances} instances x {shape['workers']} workers "
               f"(pool {shape['pool_size']}, overflow {shape['max_overflow']}, "
               f"revalidation {'on' if shape['revalidation'] else 'off'}):\n")
    width = max(len(r[0]) for r in rows)
    click.echo(f"{'':{width}}  {'direct':>10}  {'behind a pooler':>18}")
    for label, left, right in rows:
        click.echo(f"{label:{width}}  {left!s:>10}  {right!s:>18}")
    click.echo("\nDirect: instances x (1 + workers x (pool + overflow + revalidation)) + 2 "
               "+ plugin pool. Behind a pooler: instances + 2 + the pooler's pool.")


def _fits(need: int, usable: int) -> str:
    return "yes" if need <= usable else f"no (+{need - usable})"
