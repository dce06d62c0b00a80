"""The deploy report: the release phase records a deploy; the status page draws
the last 24 hours and measures each deploy's window (posts due, lag, late, missed, gaps)."""

import re
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.cluster import (
    PLUGINS_KEY,
    PUBLISH_KEY,
    Instance,
    base_env,
    flask_cmd,
    wait_for,
)
from tests.harness.support import PASSWORD, WebSession, cli_user, text
from webapp.extensions import db
from webapp.leadership.keys import PUBLISH
from webapp.models import Deploy, LeaderEvent, Post
from webapp.ops.deploys import build_timeline, report
from webapp.ops.deploys.timeline import lane, shade_of

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)
RELEASE_VARIABLES = ("SOURCE_VERSION", "HEROKU_RELEASE_VERSION", "RENDER_GIT_COMMIT",
                     "FLY_IMAGE_REF")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def record_leader_events(key: int, *changes: tuple[str, int, str, float]) -> None:
    db.session.add_all(LeaderEvent(key=key, kind=kind, term=term, holder=holder, at=at(s))
                       for kind, term, holder, s in changes)
    db.session.commit()


def post(slug: str, due: float, published: float | None, status: str = "published") -> None:
    db.session.add(Post(title=slug, slug=slug, body="", status=status, version=1,
                        publish_at=at(due),
                        published_at=None if published is None else at(published)))


@pytest.mark.parametrize("variable", RELEASE_VARIABLES)
def test_the_release_phase_records_the_platforms_version(app, monkeypatch, variable):
    for name in RELEASE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "v42-abc")
    # the real command, in this process (test_procfile_on_heroku.py runs the Procfile's release)
    result = app.test_cli_runner().invoke(args=["release"])
    assert result.exit_code == 0, result.output
    assert "recorded deploy v42-abc" in result.output
    with app.app_context():
        deploy = db.session.scalar(sa.select(Deploy))
        assert (deploy.version, deploy.source) == ("v42-abc", variable)


def test_without_a_platform_variable_the_version_is_the_git_commit(app, monkeypatch):
    for name in RELEASE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    commit = app.test_cli_runner().invoke(args=["record-deploy"])
    assert commit.exit_code == 0, commit.output
    with app.app_context():
        deploy = db.session.scalar(sa.select(Deploy))
    assert deploy.source == "git" and len(deploy.version) >= 7


def test_a_deploy_window_counts_due_posts_their_lag_late_and_missed(app):
    with app.app_context():
        db.session.add(Deploy(version="v1", source="given", at=T0))
        post("on-time", 10, 10.5)
        post("slow", 20, 22)
        post("late", 30, 120)  # 90 s after its time
        post("missed", 40, None, status="scheduled")
        post("after-the-window", 60 * 31, None, status="scheduled")
        record_leader_events(PUBLISH.value, ("acquired", 1, "a", -100), ("released", 1, "a", 50),
               ("acquired", 2, "b", 53.5), ("lost", 2, "b", 70), ("acquired", 3, "a", 71))
        [window] = report(at(60 * 40))
    assert (window.due, window.published, window.late, window.missed) == (4, 3, 1, 1)
    assert window.lag_p50 == 2 and window.lag_max == 90
    assert window.end == at(30 * 60) and not window.ongoing
    assert window.no_leader["publish"] == 3.5
    assert window.no_leader["plugins"] == 30 * 60  # never led in this window


def test_a_window_ends_at_the_next_deploy(app):
    with app.app_context():
        db.session.add_all([Deploy(version="v1", source="git", at=T0),
                            Deploy(version="v2", source="git", at=at(120))])
        post("first", 60, 60.2)
        post("second", 180, 180.4)
        newest, oldest = report(at(200))
    assert (newest.deploy.version, newest.due, newest.ongoing) == ("v2", 1, True)
    assert (oldest.deploy.version, oldest.due, oldest.end) == ("v1", 1, at(120))


def test_a_term_that_ended_after_its_successor_began_leaves_no_gap(app):
    with app.app_context():
        record_leader_events(PUBLISH.value, ("acquired", 1, "a", 0), ("acquired", 2, "b", 10),
               ("lost", 1, "a", 12), ("evicted", 2, "b", 20), ("acquired", 3, "c", 25))
        segments = lane(PUBLISH.value, at(-5), at(30))
    nobody = [(s.start, s.end) for s in segments if not s.holder]
    assert nobody == [(at(-5), at(0)), (at(20), at(25))]
    assert [s.holder for s in segments if s.holder] == ["a", "b", "c"]


def test_a_new_install_shows_no_data_before_it_ran_and_marks_a_failover(app, auth):
    with app.app_context():
        now = datetime.now(UTC)
        db.session.add(Deploy(version="v1", source="git", at=now - timedelta(minutes=10)))
        first = now - timedelta(minutes=9)  # a new install: nothing before this
        db.session.add_all(
            LeaderEvent(key=PUBLISH.value, kind=kind, term=term, holder=holder,
                        at=first + timedelta(seconds=s))
            for kind, term, holder, s in (("acquired", 1, "soloist:web.1:11:abcdefgh", 0),
                                          ("ended", 1, "soloist:web.1:11:abcdefgh", 60),
                                          ("acquired", 2, "soloist:web.2:12:bcdefghi", 60.4)))
        db.session.commit()
        timeline = build_timeline(now)
        [window] = report(now)
    # the drawing starts at the first data (the deploy), not 24 hours back
    assert timeline.since == now - timedelta(minutes=10) and timeline.starts_at_first_data
    first, *rest = timeline.lanes["publish"]
    assert not first.known and first.seconds == 60  # released, not yet running: no data
    assert [s.known for s in rest if not s.holder] == [True]  # the 0.4 s failover gap
    assert [(how, round(gap, 1)) for _, how, gap in timeline.failovers["publish"]] == [
        ("ended", 0.4)]
    assert window.no_leader["publish"] == pytest.approx(0.4, abs=0.01)  # not the 23 h before
    page = text(auth.client("viewer").get("/status/"))
    assert 'class="seg nodata"' in page and "no data yet" in page
    assert 'class="failover"' in page and "without a leader" in page
    assert re.search(r"Since .*\(when Soloist first ran, 10 min \d+ s ago\)", page)


def test_a_new_install_is_drawn_from_its_first_leader_across_the_width_without_a_red_sliver(
        app, auth):
    # 20 minutes old, no deploy recorded: each key taken as the fleet started, a moment apart
    with app.app_context():
        now = datetime.now(UTC)
        began = now - timedelta(minutes=20)
        db.session.add_all([
            LeaderEvent(key=PUBLISH.value, kind="acquired", term=1, holder="soloist:web.1:7:ab",
                        at=began),
            LeaderEvent(key=PLUGINS_KEY, kind="acquired", term=1, holder="soloist:web.1:7:ab",
                        at=began + timedelta(seconds=0.3))])
        db.session.commit()
        timeline = build_timeline(now)
    assert timeline.since == began and timeline.until == now
    assert timeline.x(began) == 90 and timeline.x(now) == 1000  # the 20 minutes fill the width
    for name, segments in timeline.lanes.items():  # no "no leader" before the first leader
        assert [s for s in segments if not s.holder and s.known] == [], name
    # the axis reads in minutes, not hours: a mark every 5 minutes
    ticks = timeline.ticks(8)
    assert 3 <= len(ticks) <= 4 and all(t.minute % 5 == 0 and t.second == 0 for t in ticks)
    page = text(auth.client("viewer").get("/status/"))
    assert 'class="seg none"' not in page, page.split('id="timeline"')[1][:3000]
    assert "no data yet" not in page


def test_the_status_page_draws_the_last_day_and_each_deploy(app, auth):
    with app.app_context():
        now = datetime.now(UTC)
        db.session.add(Deploy(version="v7-<b>", source="SOURCE_VERSION",
                              at=now - timedelta(hours=2)))
        record_leader_events(PUBLISH.value, ("acquired", 1, "soloist-sched:web.1:11", -1))
        db.session.execute(sa.update(LeaderEvent).values(at=now - timedelta(hours=3)))
        db.session.commit()
        assert build_timeline(now).instances() == ["web.1"]
    page = text(auth.client("viewer").get("/status/"))
    assert '<svg class="timeline wide"' in page and "v7-&lt;b&gt;" in page
    # an instance's colour comes from its name: the same on every page load
    assert f'class="seg shade-{shade_of("web.1")}"' in page and "web.1" in page
    assert "<b>" not in page.split('id="timeline"')[1]


# A rolling restart during a stream of due posts --------------------------------------


def deploy_row(page: str, deploy_id: int) -> list[str]:
    """Return the text of the cells of a deploy's row in the status page's report."""
    row = page.split(f'id="deploy-{deploy_id}"')[1].split("</tr>")[0]
    return [re.sub(r"<[^>]+>", "", "<td" + cell).strip() for cell in row.split("<td")[1:]]


@pytest.mark.slow
def test_a_rolling_restart_during_due_posts_shows_in_the_report_with_none_missed(
        fleet_db, tmp_path):
    url, view = fleet_db
    env = {k: v for k, v in base_env(url).items() if k not in RELEASE_VARIABLES}
    flask_cmd({**env, "SOURCE_VERSION": "v1"}, "release")
    cli_user(url, "ops@example.com", "viewer", PASSWORD, token=False)
    started = [Instance(n, url, workers=1, log_dir=tmp_path).start() for n in ("a", "b")]
    try:
        wait_for(lambda: set(view.holders()) == {PUBLISH_KEY, PLUGINS_KEY}, 60, "leaders")
        flask_cmd({**env, "SOURCE_VERSION": "v2"}, "release")  # deploy 2: the restart follows
        first = datetime.now(UTC) + timedelta(seconds=1)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO posts (title, slug, body, status, publish_at, version, created_at, "
                "updated_at) SELECT 'R' || i, 'r-' || i, '', 'scheduled', "
                "%s + i * interval '100 milliseconds', 1, now(), now() "
                "FROM generate_series(0, 79) i", (first,))
            conn.execute("SELECT pg_notify('soloist_wake', 'publish')")
        for index, name in enumerate(("a2", "b2")):  # replace a, then b, as a platform does
            started.append(Instance(name, url, workers=1, log_dir=tmp_path).start())
            wait_for(lambda: len(view.lock_sessions()) == 3, 60, f"{name} standing by")
            started[index].stop()  # SIGTERM: it hands its keys over, then exits
        wait_for(lambda: view.query("SELECT count(*) FROM posts WHERE status = 'published'"
                                    )[0][0] == 80, 30, "every post published")
        page = WebSession(started[-1].url, "ops@example.com").get("/status/")
    finally:
        for instance in started:
            instance.stop()
    version, release, _window, due, p50, lag_max, late, missed, gaps = deploy_row(page, 2)
    assert version.startswith("v2") and (due, late, missed) == ("80", "0", "0")
    assert re.fullmatch(r"[\d.]+ m?s, the fleet waited at most \d+ ms", release)  # none to run
    assert "publish" in gaps and "plugins" in gaps
    per_post = view.query("SELECT count(*) FROM outbox_events WHERE topic = 'post.published' "
                          "GROUP BY post_id")
    assert len(per_post) == 80 and {n for (n,) in per_post} == {1}


def test_a_flapping_hour_is_drawn_as_one_busy_stretch_with_its_marks_thinned(app, auth):
    # 300 terms in an hour, each ended by a kill (0.2 s without a leader), a day ago to now
    with app.app_context():
        now = datetime.now(UTC)
        began = now - timedelta(hours=23)
        def holder(term: int) -> str:
            return f"soloist:web.{term % 2 + 1}:7"

        db.session.add(LeaderEvent(key=PUBLISH.value, kind="acquired", term=1, holder=holder(1),
                                   at=now - timedelta(hours=24)))
        for term in range(2, 302):
            start = began + timedelta(seconds=12 * term)
            db.session.add_all([
                LeaderEvent(key=PUBLISH.value, kind="ended", term=term - 1,
                            holder=holder(term - 1), at=start - timedelta(seconds=0.2)),
                LeaderEvent(key=PUBLISH.value, kind="acquired", term=term, holder=holder(term),
                            at=start)])
        db.session.commit()
        timeline = build_timeline(now)
    lane_ = timeline.lanes["publish"]
    assert len(lane_) > 600  # every term and gap is there to measure
    drawn = timeline.drawn(lane_)
    [stretch] = [s for s in drawn if s.changes]
    assert stretch.changes > 590 and stretch.leaderless_s == pytest.approx(300 * 0.2, abs=0.5)
    assert len(drawn) < 10
    marks = timeline.marks("publish")
    assert len(marks) < 20 and sum(1 + more for *_, more in marks) == 300
    page = text(auth.client("viewer").get("/status/"))
    assert page.count("<rect") < 40 and "many changes of leader" in page
