"""The publish tick with an injected clock, fenced writes, and the runner's wake-ups."""

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.support import race_two
from webapp import posts
from webapp.extensions import db
from webapp.leadership.keys import PUBLISH
from webapp.models import LeaderState, OutboxEvent, Post
from webapp.scheduling import publish
from webapp.scheduling.runner import Scheduler

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)


def add_posts(count: int, publish_at: datetime, step: timedelta = timedelta(0),
              unpublish_at: datetime | None = None, prefix: str = "p") -> None:
    """Insert scheduled posts directly."""
    db.session.execute(sa.insert(Post), [
        {"title": f"Post {i}", "slug": f"{prefix}-{i}", "body": "", "status": "scheduled",
         "publish_at": publish_at + i * step, "unpublish_at": unpublish_at, "version": 1,
         "created_at": T0, "updated_at": T0}
        for i in range(count)
    ])
    db.session.commit()


def statuses() -> dict[str, str]:
    return dict(db.session.execute(sa.select(Post.slug, Post.status)).all())


def published_events() -> list[int]:
    return list(db.session.scalars(
        sa.select(OutboxEvent.post_id).where(OutboxEvent.topic == "post.published")))


def test_tick_publishes_only_what_is_due_by_the_clock_it_is_given(any_app):
    with any_app.app_context():
        add_posts(3, T0, step=timedelta(minutes=1))
        upcoming = publish.tick(T0 + timedelta(seconds=30))
        assert statuses() == {"p-0": "published", "p-1": "scheduled", "p-2": "scheduled"}
        assert upcoming == T0 + timedelta(minutes=1)
        post = db.session.scalar(sa.select(Post).where(Post.slug == "p-0"))
        assert post.published_at == T0 + timedelta(seconds=30)
        assert published_events() == [post.id]


def test_tick_unpublishes_posts_whose_time_is_up(any_app):
    with any_app.app_context():
        add_posts(1, T0, unpublish_at=T0 + timedelta(hours=1))
        assert publish.tick(T0) == T0 + timedelta(hours=1)
        assert statuses() == {"p-0": "published"}
        assert publish.tick(T0 + timedelta(hours=1)) is None
        assert statuses() == {"p-0": "unpublished"}
        topics = db.session.scalars(sa.select(OutboxEvent.topic).order_by(OutboxEvent.id)).all()
        assert topics == ["post.published", "post.unpublished"]


def test_a_big_backlog_is_published_in_batches(any_app):
    with any_app.app_context():
        add_posts(posts.BATCH_SIZE + 10, T0)
        now = T0 + timedelta(seconds=1)
        ticks = 1
        while publish.tick(now) == now:  # out of time: come back at once (a slow machine)
            ticks += 1
            assert ticks <= 10
        assert set(statuses().values()) == {"published"}
        assert len(published_events()) == posts.BATCH_SIZE + 10


def test_a_tick_records_its_last_unit_of_work(app):
    with app.app_context():
        db.session.add(LeaderState(key=PUBLISH.value, term=1, holder="x", last_result=""))
        db.session.commit()
        add_posts(2, T0)
        publish.tick(T0)
        state = db.session.get(LeaderState, PUBLISH.value)
        assert state.last_result == "published 2, unpublished 0"
        assert state.last_work_at == T0


def _publish_until_done(url: str, barrier, results) -> None:
    """Child process: run the publish tick as fast as possible until nothing is due."""
    from tests.harness.support import make_app

    app = make_app(url)
    ids: list[int] = []
    with app.app_context():
        barrier.wait(timeout=30)
        while True:
            now = datetime.now(UTC)
            batch = posts.publish_due(now, limit=50)
            if not batch:
                break
            ids.extend(batch)
        db.engine.dispose()
    results.put(ids)


def test_two_processes_ticking_at_once_publish_every_post_exactly_once(app, pg_url):
    with app.app_context():
        add_posts(3000, T0)
    batches = race_two(_publish_until_done, pg_url)
    everything = batches[0] + batches[1]
    assert len(everything) == 3000 and len(set(everything)) == 3000
    with app.app_context():
        events = published_events()
        assert len(events) == 3000 and len(set(events)) == 3000
        assert set(statuses().values()) == {"published"}


def test_a_post_already_published_is_not_published_again(app):
    with app.app_context():
        add_posts(1, T0)
        assert len(posts.publish_due(T0)) == 1
        # a second (stale) leader with the same clock finds nothing to do
        assert posts.publish_due(T0) == []
        assert len(published_events()) == 1


@pytest.fixture
def scheduler(app):
    """Run a real scheduler thread in this process."""
    running = Scheduler(app)
    running.start()
    yield running
    assert running.stop(10)


def test_posts_that_fell_due_while_everything_was_down_are_published(app, pg_view):
    with app.app_context():
        add_posts(20, datetime.now(UTC) - timedelta(hours=2))
    with app.app_context():
        # nothing leads yet: the backlog waits
        assert set(statuses().values()) == {"scheduled"}
    running = Scheduler(app)
    running.start()
    try:
        with app.app_context():
            wait_for(lambda: set(statuses().values()) == {"published"} or db.session.rollback(),
                     10, "the backlog to be published by the first leader")
            assert len(published_events()) == 20
    finally:
        running.stop(10)


def test_scheduling_something_sooner_wakes_the_leader(app, scheduler):
    wait_for(lambda: scheduler.leadership.held, 10, "the scheduler to lead")
    wait_for(lambda: PUBLISH.value in scheduler.due, 10, "a first publish tick")
    with app.app_context():
        posts.create_post("Soon", "soon", "", datetime.now(UTC) + timedelta(milliseconds=300))

        def published() -> bool:
            db.session.rollback()
            return statuses()["soon"] == "published"

        # the idle re-check is 10 s: only the NOTIFY makes this fast
        wait_for(published, 3, "the woken leader to publish the post")
        found = db.session.scalar(sa.select(Post).where(Post.slug == "soon"))
        assert found.published_at >= found.publish_at


def test_scheduler_stop_hands_leadership_over(app, pg_view):
    running = Scheduler(app)
    running.start()
    wait_for(lambda: len(pg_view.holders()) == 2, 10, "the scheduler to take both keys")
    assert running.stop(10)
    assert pg_view.holders() == {}
    kinds = [r[0] for r in pg_view.query("SELECT kind FROM leader_events ORDER BY id")]
    assert kinds.count("released") == 2
