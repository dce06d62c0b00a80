"""Built-in plugin: trim timer runs, deliveries and leadership events past their retention."""

from datetime import timedelta

import sqlalchemy as sa

from ..extensions import db
from ..models import HookDelivery, LeaderEvent, TimerRun, WebhookDelivery
from .base import Param, Plugin, RunContext

plugin = Plugin("housekeeping", "Housekeeping",
                "Deletes old timer runs, webhook and hook deliveries and leadership events.")
plugin.default_timer("trim", "trim", name="Housekeeping: trim history", cron="17 3 * * *",
                     misfire="run_once", grace_seconds=3600)


def trim(now, runs_days: int = 30, deliveries_days: int = 30,
         leader_events_days: int = 90) -> dict[str, int]:
    """Delete finished history older than each retention; return how many rows of each."""
    def before(days: int):
        return now - timedelta(days=days)

    statements = {
        "timer runs": sa.delete(TimerRun).where(
            TimerRun.status.not_in(("queued", "running")),
            sa.func.coalesce(TimerRun.finished_at, TimerRun.scheduled_for) < before(runs_days)),
        "webhook deliveries": sa.delete(WebhookDelivery).where(
            WebhookDelivery.status.in_(("delivered", "failed")),
            WebhookDelivery.created_at < before(deliveries_days)),
        "hook deliveries": sa.delete(HookDelivery).where(
            HookDelivery.status.in_(("done", "failed")),
            HookDelivery.created_at < before(deliveries_days)),
        "leadership events": sa.delete(LeaderEvent).where(
            LeaderEvent.at < before(leader_events_days)),
    }
    counts = {name: db.session.execute(statement.execution_options(
        synchronize_session=False)).rowcount for name, statement in statements.items()}
    db.session.commit()
    return counts


@plugin.action("trim", params=[
    Param("runs_days", "int", 30, minimum=1, help="keep timer runs this many days"),
    Param("deliveries_days", "int", 30, minimum=1, help="keep deliveries this many days"),
    Param("leader_events_days", "int", 90, minimum=1, help="keep leadership events this long"),
])
def trim_action(ctx: RunContext, **retention: int) -> str:
    """Delete history past its retention."""
    counts = trim(ctx.started_at, **retention)
    return "deleted " + ", ".join(f"{n} {name}" for name, n in counts.items())
