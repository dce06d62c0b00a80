"""Built-in plugin: trim history past its retention, in short batches.

Every delete takes at most BATCH rows in its own transaction, so a run never holds a
long transaction or many locks, and a backlog (the first run after months of history)
is cleared a batch at a time until the run's time is up; the next run goes on.

An outbox event goes only when nothing refers to it any more: processed, older than
its retention, and without any hook or webhook delivery left (those are trimmed
first, finished ones only). So a delivery still pending, running or sending always
keeps its event, and the cascade from the outbox never removes a delivery early.
"""

from collections.abc import Callable
from datetime import timedelta

import sqlalchemy as sa

from ..db import rows_changed
from ..extensions import db
from ..models import (
    AuditEvent,
    CachePurge,
    HookDelivery,
    LeaderEvent,
    LoginFailure,
    OutboxEvent,
    PostAutosave,
    PostRevision,
    PreviewLink,
    RateLimitHit,
    TimerRun,
    UserSession,
    WebhookDelivery,
)
from ..ops.release import backfills
from ..posts import revisions
from .base import Param, Plugin, RunContext

plugin = Plugin("housekeeping", "Housekeeping",
                "Deletes old timer runs, webhook and hook deliveries, processed outbox events, "
                "leadership events, failed sign-ins, ended sign-in sessions, audit events, "
                "old post revisions, expired preview links and unsaved text left for a month "
                "(autosaves); finishes the data copies a release began.")
plugin.default_timer("trim", "trim", name="Housekeeping: trim history", cron="17 3 * * *",
                     misfire="run_once", grace_seconds=3600)
# a release copies for seconds and leaves the rest of a backfill to the fleet: within minutes
plugin.default_timer("backfills", "finish_backfills",
                     name="Housekeeping: finish the releases' backfills", every=(5, "minutes"),
                     misfire="run_once", grace_seconds=3600)

BATCH = 2000  # rows per delete: tens of milliseconds, far below the statement timeout
MARGIN_SECONDS = 15.0  # stop starting batches this long before the run's maximum runtime
FINISHED_HOOKS = ("done", "failed")
FINISHED_WEBHOOKS = ("delivered", "failed")
AUDIT_DAYS, AUDIT_MIN_DAYS = 365, 30  # the audit log is kept a year, and never under a month


def trim(now, runs_days: int = 30, deliveries_days: int = 30, leader_events_days: int = 90,
         outbox_days: int = 30, login_failures_days: int = 1, sessions_days: int = 90,
         audit_days: int = AUDIT_DAYS, previews_days: int = 7, autosaves_days: int = 30, *,
         batch: int = BATCH,
         more: Callable[[], bool] = lambda: True) -> dict[str, int]:
    """Delete finished history older than each retention; return how many rows of each.

    more() is asked before each batch; once it says no, the rest waits for the next run.
    """
    def before(days: int):
        return now - timedelta(days=days)

    outbox = [OutboxEvent.processed_at.is_not(None),  # the partial index ix_outbox_processed_at
              OutboxEvent.processed_at < before(outbox_days)]
    steps = [  # deliveries before the outbox: the events they free go in the same run
        ("hook deliveries", HookDelivery.id, [
            HookDelivery.status.in_(FINISHED_HOOKS),
            HookDelivery.created_at < before(deliveries_days)], []),
        ("webhook deliveries", WebhookDelivery.id, [
            WebhookDelivery.status.in_(FINISHED_WEBHOOKS),
            WebhookDelivery.created_at < before(deliveries_days)], []),
        ("outbox events", OutboxEvent.processed_at, outbox, [  # only if nothing refers to it
            ~sa.exists().where(HookDelivery.event_id == OutboxEvent.id),
            ~sa.exists().where(WebhookDelivery.event_id == OutboxEvent.id)]),
        ("timer runs", TimerRun.id, [
            TimerRun.status.not_in(("queued", "running")),
            sa.func.coalesce(TimerRun.finished_at, TimerRun.scheduled_for)
            < before(runs_days)], []),
        ("leadership events", LeaderEvent.id, [LeaderEvent.at < before(leader_events_days)], []),
        ("cache purges", CachePurge.id, [  # done or given up: the status page's last success
            CachePurge.status.in_(("done", "failed")),  # is read from what is kept
            CachePurge.created_at < before(deliveries_days)], []),
        ("login failures", LoginFailure.id, [LoginFailure.at < before(login_failures_days)], []),
        ("rate limit hits", RateLimitHit.id, [RateLimitHit.at < before(login_failures_days)], []),
        ("ended sessions", UserSession.id, [UserSession.ended_at < before(sessions_days)], []),
        ("audit events", AuditEvent.at, [AuditEvent.at < before(audit_days)], []),
        ("post revisions", PostRevision.id, [PostRevision.was_live.is_(False)],
         revisions.prunable()),  # REVISIONS_KEEP a post, and every version readers saw
        ("preview links", PreviewLink.expires_at,
         [PreviewLink.expires_at < before(previews_days)], []),
        # one row per editor and post, gone when they save: a small table, read whole
        ("autosaves", PostAutosave.id, [PostAutosave.saved_at < before(autosaves_days)], []),
    ]
    return {name: delete_in_batches(key, [*found, *checked], found, batch, more)
            for name, key, found, checked in steps}


def delete_in_batches(key, condition: list, found: list, batch: int,
                      more: Callable[[], bool]) -> int:
    """Delete the rows matching condition, batch rows per transaction, in (key, id) order.

    Each batch looks at the next rows matching found (the part of condition an index
    answers) after the last row looked at, then deletes those of them that match the
    whole condition, by primary key. So every batch reads at most batch rows, whatever
    the planner thinks of the rest of the condition, and a run reads each row once.
    """
    table = key.class_
    order = [key] if key is table.id else [key, table.id]
    deleted, last = 0, None
    while more():
        query = sa.select(table.id, key).where(*found).order_by(*order).limit(batch)
        if last is not None:
            query = query.where(*_after(key, table.id, *last))
        rows = db.session.execute(query).all()
        if rows:  # the condition again: a row changed since it was read (redelivered) stays
            deleted += rows_changed(
                sa.delete(table).where(table.id.in_([row[0] for row in rows]), *condition)
                .execution_options(synchronize_session=False))
        db.session.commit()
        if len(rows) < batch:
            break
        last = rows[-1]
    return deleted


def _after(key, id_column, last_id, last_key) -> list:
    """Return the condition "after (last_key, last_id)" in (key, id) order."""
    if key is id_column:
        return [id_column > last_id]
    # key >= last_key is what an index on key can answer; the rest breaks ties
    return [key >= last_key, sa.or_(key > last_key, id_column > last_id)]


@plugin.action("trim", params=[
    Param("runs_days", "int", 30, minimum=1, help="keep timer runs this many days"),
    Param("deliveries_days", "int", 30, minimum=1, help="keep deliveries this many days"),
    Param("leader_events_days", "int", 90, minimum=1, help="keep leadership events this long"),
    Param("outbox_days", "int", 30, minimum=1,
          help="keep processed outbox events this many days (and while a delivery needs them)"),
    Param("login_failures_days", "int", 1, minimum=1,
          help="keep failed sign-ins this many days (throttling looks back 15 minutes)"),
    Param("sessions_days", "int", 90, minimum=1,
          help="keep ended sign-in sessions this many days (users and admins see them)"),
    # only admins change this plugin's timer (webapp.timers.access); nobody goes under the floor
    Param("audit_days", "int", AUDIT_DAYS, minimum=AUDIT_MIN_DAYS,
          help=f"keep audit events this many days (at least {AUDIT_MIN_DAYS}: a change stays "
               "on record for a month whatever the settings)"),
    Param("previews_days", "int", 7, minimum=1,
          help="keep preview links this many days after they expire (they stopped working "
               "then; the editor's page no longer lists them)"),
    Param("autosaves_days", "int", 30, minimum=1,
          help="keep an editor's unsaved text (autosave) this many days after it was last "
               "typed; reopening the post offers it back until then"),
])
def trim_action(ctx: RunContext, **retention: int) -> str:
    """Delete history past its retention, a batch at a time, until the run's time is up."""
    def more() -> bool:
        return ctx.time_left() > MARGIN_SECONDS

    counts = trim(ctx.started_at, **retention, more=more)
    done = "deleted " + ", ".join(f"{n} {name}" for name, n in counts.items())
    return done if more() else done + "; stopped at the time limit, the next run goes on"


@plugin.action("finish_backfills")
def finish_backfills_action(ctx: RunContext) -> str:
    """Go on with the data copies releases left to the fleet, a batch at a time, pausing
    after each as long as it took, until done or the run's time is up."""
    done = backfills.finish(lambda: ctx.time_left() > MARGIN_SECONDS, ctx.pause)
    return "; ".join(done) if done else "nothing left to do"
