"""The leader view: pg_locks decoding, the page, its fragment, ops actions, health checks."""

import os
import re
import signal
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, holding, pid_of, wait_for
from tests.harness.support import (
    AuthActions,
    WebSession,
    csrf_from,
    csrf_token,
    make_app,
    post_form,
    record_term,
)
from webapp.extensions import db
from webapp.leadership.files import FileLockSession
from webapp.leadership.keys import KEYS, SchedulerKey, derive_key
from webapp.leadership.status import snapshot
from webapp.models import LeaderEvent, LeaderState


def row(snap, name: str):
    return next(k for k in snap.keys if k.key.name == name)


# pg_locks decoding against real sessions ----------------------------------------------

def test_snapshot_names_the_session_holding_each_key_and_the_rest_as_standbys(app, pg_url):
    with holding(pg_url, "soloist:web.1:111", PUBLISH_KEY), \
            holding(pg_url, "soloist:web.2:222", PLUGINS_KEY), \
            holding(pg_url, "soloist:web.3:333"), holding(pg_url, "psql"), app.app_context():
        snap = snapshot()
    publish, plugins = row(snap, "publish"), row(snap, "plugins")
    assert publish.holder.session.application_name == "soloist:web.1:111"
    assert (publish.holder.session.instance, publish.holder.session.pid) == ("web.1", 111)
    assert publish.holder.session.client_addr == "127.0.0.1"
    assert sorted(s.application_name for s in publish.standbys) == [
        "soloist:web.2:222", "soloist:web.3:333"]
    assert plugins.holder.session.application_name == "soloist:web.2:222"
    assert {s.application_name for s in snap.sessions} == {
        "soloist:web.1:111", "soloist:web.2:222", "soloist:web.3:333"}  # not psql


def test_snapshot_decodes_full_64_bit_keys(app, pg_url, monkeypatch):
    value = derive_key("test-negative")
    while value >= 0:  # a key with the sign bit set exercises classid's high bit
        value = derive_key(f"test-{value}")
    monkeypatch.setitem(KEYS, "wide", SchedulerKey("wide", value, "test key"))
    with holding(pg_url, "soloist:wide:1", value), app.app_context():
        snap = snapshot()
    assert row(snap, "wide").holder.session.application_name == "soloist:wide:1"
    assert row(snap, "publish").holder is None


def test_snapshot_ignores_other_databases_and_two_int_locks(app, pg_url):
    # the same bigint key in another database, and (0, key) taken as two int4s (objsubid 2)
    with holding(pg_url, "soloist:elsewhere:1", PUBLISH_KEY, dbname="test"), \
            holding(pg_url, "soloist:twoints:2") as conn:
        conn.execute("SELECT pg_advisory_lock(0, %s)", (PLUGINS_KEY,))
        with app.app_context():
            snap = snapshot()
    assert row(snap, "publish").holder is None and row(snap, "plugins").holder is None
    assert [s.application_name for s in snap.sessions] == ["soloist:twoints:2"]


def test_snapshot_reads_term_and_marks_an_old_heartbeat_stale(app, pg_url):
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY, PLUGINS_KEY) as conn:
        record_term(app, PUBLISH_KEY, conn, term=7, heartbeat_age=30)
        record_term(app, PLUGINS_KEY, conn, term=2, heartbeat_age=0.5)
        with app.app_context():
            snap = snapshot()
    publish, plugins = row(snap, "publish"), row(snap, "plugins")
    assert publish.holder.term == 7 and publish.holder.stale
    assert 29 < publish.holder.heartbeat_age_s < 60
    assert publish.last_result == "published 3"
    assert plugins.holder.term == 2 and not plugins.holder.stale


def test_history_says_how_long_each_leader_held(app, pg_url):
    with holding(pg_url, "soloist:b:2", PUBLISH_KEY) as conn, app.app_context():
        record_term(app, PUBLISH_KEY, conn, term=2)
        now = db.session.scalar(sa.text("SELECT now()"))
        t0 = now - timedelta(minutes=10)
        db.session.add_all([
            LeaderEvent(key=PUBLISH_KEY, kind="acquired", term=1, holder="soloist:a:1", at=t0),
            LeaderEvent(key=PUBLISH_KEY, kind="released", term=1, holder="soloist:a:1",
                        at=t0 + timedelta(seconds=90)),
            LeaderEvent(key=PUBLISH_KEY, kind="acquired", term=2, holder="soloist:b:2",
                        at=t0 + timedelta(seconds=91)),
        ])
        db.session.commit()
        history = snapshot().history
    assert [(c.kind, c.term) for c in history] == [("acquired", 2), ("released", 1),
                                                    ("acquired", 1)]
    assert history[1].held_for_s == pytest.approx(90)
    assert history[2].held_for_s == pytest.approx(90) and not history[2].ongoing
    assert history[0].ongoing and history[0].held_for_s > 500


# the page and its fragment -------------------------------------------------------------

def test_status_page_shows_holder_standbys_history_and_as_of_time(app, auth, pg_url):
    client = auth.client("viewer")
    with holding(pg_url, "soloist:web.1:111", PUBLISH_KEY) as conn, \
            holding(pg_url, "soloist:web.2:222"):
        record_term(app, PUBLISH_KEY, conn, term=4)
        with app.app_context():
            db.session.add(LeaderEvent(key=PUBLISH_KEY, kind="acquired", term=4,
                                       holder="soloist:web.1:111", at=datetime.now(UTC)))
            db.session.commit()
        html = client.get("/status/").get_data(as_text=True)
    assert 'data-holder="soloist:web.1:111"' in html
    assert "0x9a37b7a1" in html and "2587342753" in html
    assert "soloist:web.2:222" in html  # a standby, in the keys and instances tables
    assert "As of" in html and "Nobody leads this key" in html  # plugins has no holder
    assert "so far" in html  # the current term's duration
    assert "Step down" not in html  # viewers see no ops actions


def test_fragment_renders_the_live_part_alone_and_polls_slower_when_hidden(app, auth):
    client = auth.client("viewer")
    response = client.get("/status/live", headers={"HX-Request": "true"})
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "<html" not in html
    assert 'id="status-live"' in html and "As of" in html
    assert 'hx-trigger="every 2s, visibilitychange from:document"' in html
    assert 'data-hidden-poll="15"' in html  # soloist.js skips polls in a hidden tab (no eval)
    assert "Connection lost" in html  # shown by CSS when a poll fails


def test_fragment_polled_after_sign_out_sends_the_page_to_sign_in(app):
    response = app.test_client().get("/status/live", headers={"HX-Request": "true"})
    assert response.status_code == 401
    assert response.headers["HX-Redirect"].startswith("/login")


def test_status_page_needs_sign_in(app):
    response = app.test_client().get("/status/")
    assert response.status_code == 302 and "/login" in response.headers["Location"]


def test_sqlite_status_shows_file_lock_holders_and_says_single_host(sqlite_app, sqlite_url):
    client = sqlite_app.test_client()
    AuthActions(client).login("viewer")
    locks = FileLockSession(sqlite_url, "solo")
    try:
        assert locks.try_lock(PUBLISH_KEY)
        locks.record_acquired(PUBLISH_KEY)
        html = client.get("/status/").get_data(as_text=True)
        with sqlite_app.app_context():
            snap = snapshot()
    finally:
        locks.close()
    assert f'data-holder="{locks.name}"' in html
    assert "Single-host deployment" in html
    assert snap.single_host and row(snap, "publish").holder.term == 1
    assert row(snap, "plugins").holder is None


# ops actions ----------------------------------------------------------------------------

@pytest.mark.parametrize("role", ["viewer", "editor"])
@pytest.mark.parametrize("action", ["step-down", "evict"])
def test_ops_actions_are_refused_below_admin(app, auth, pg_url, role, action):
    client = auth.client(role, email="someone@example.com")
    token = csrf_token(client, "/status/")
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY) as conn:
        assert client.get(f"/status/publish/{action}").status_code == 403
        response = client.post(f"/status/publish/{action}",
                               data={"csrf_token": token, "holder": "soloist:a:1"})
        assert response.status_code == 403
        assert not conn.closed and conn.execute("SELECT 1").fetchone()
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(LeaderEvent)) == 0


def test_ops_actions_send_anonymous_users_to_sign_in(app):
    client = app.test_client()
    token = csrf_token(client, "/login")
    for action in ("step-down", "evict"):
        response = client.post(f"/status/publish/{action}",
                               data={"holder": "soloist:a:1", "csrf_token": token})
        assert response.status_code == 302 and "/login" in response.headers["Location"]
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(LeaderEvent)) == 0


def test_step_down_asks_the_holder_records_who_and_wakes_it(app, auth, pg_url):
    client = auth.client("admin")
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY) as conn, \
            holding(pg_url, "listener") as listener:
        record_term(app, PUBLISH_KEY, conn, term=3)
        listener.execute("LISTEN soloist_wake")
        page = client.get("/status/publish/step-down").get_data(as_text=True)
        assert "soloist:a:1" in page and "Step down" in page
        response = post_form(client, "/status/publish/step-down", {"holder": "soloist:a:1"})
        assert response.status_code == 303
        notes = list(listener.notifies(timeout=5, stop_after=1))
        html = client.get("/status/").get_data(as_text=True)
    assert "was asked to step down" in html and "step-down requested" in html
    assert [(n.channel, n.payload) for n in notes] == [("soloist_wake", "publish")]
    with app.app_context():
        assert db.session.get(LeaderState, PUBLISH_KEY).step_down_requested
        event = db.session.scalar(sa.select(LeaderEvent).where(LeaderEvent.kind == "step_down"))
        assert (event.holder, event.term, event.detail) == ("soloist:a:1", 3,
                                                            "by admin@example.com")


def test_step_down_does_nothing_when_leadership_moved_since_confirming(app, auth, pg_url):
    client = auth.client("admin")
    with holding(pg_url, "soloist:b:2", PUBLISH_KEY) as conn:
        record_term(app, PUBLISH_KEY, conn)
        token = csrf_token(client, "/status/publish/step-down")
        response = client.post("/status/publish/step-down", follow_redirects=True,
                               data={"csrf_token": token, "holder": "soloist:a:1"})
    assert "moved to soloist:b:2" in response.get_data(as_text=True)
    with app.app_context():
        assert not db.session.get(LeaderState, PUBLISH_KEY).step_down_requested


def test_evict_terminates_the_holders_lock_session_and_records_who(app, auth, pg_url):
    client = auth.client("admin")
    with holding(pg_url, "soloist:stuck:9", PUBLISH_KEY, PLUGINS_KEY) as conn:
        record_term(app, PUBLISH_KEY, conn, term=5, heartbeat_age=60)
        page = client.get("/status/publish/evict").get_data(as_text=True)
        assert "stale" in page
        response = post_form(client, "/status/publish/evict", {"holder": "soloist:stuck:9"},
                             follow_redirects=True)
        assert "soloist:stuck:9 was evicted" in response.get_data(as_text=True)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    with app.app_context():
        snap = snapshot()
        events = db.session.execute(sa.select(LeaderEvent.key, LeaderEvent.kind,
                                              LeaderEvent.holder, LeaderEvent.detail)).all()
    assert row(snap, "publish").holder is None
    assert sorted(events) == sorted([
        (PUBLISH_KEY, "evicted", "soloist:stuck:9", "by admin@example.com"),
        (PLUGINS_KEY, "evicted", "soloist:stuck:9", "by admin@example.com")])


def test_evict_without_a_holder_says_so(app, auth):
    client = auth.client("admin")
    page = client.get("/status/plugins/evict").get_data(as_text=True)
    assert "Nobody leads the plugins key" in page
    response = post_form(client, "/status/plugins/evict", {"holder": "soloist:a:1"},
                         follow_redirects=True)
    assert "Nobody leads the plugins key" in response.get_data(as_text=True)


def test_ops_actions_refuse_a_post_without_the_csrf_token(app, auth, pg_url):
    client = auth.client("admin")
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY) as conn:
        record_term(app, PUBLISH_KEY, conn)
        for action in ("step-down", "evict"):
            response = client.post(f"/status/publish/{action}", data={"holder": "soloist:a:1"})
            assert response.status_code == 400
        assert conn.execute("SELECT 1").fetchone()  # not evicted
    with app.app_context():
        assert not db.session.get(LeaderState, PUBLISH_KEY).step_down_requested


def test_unknown_key_or_action_is_404(app, auth):
    client = auth.client("admin")
    assert client.get("/status/nosuchkey/evict").status_code == 404
    assert client.get("/status/publish/explode").status_code == 404


# health checks ---------------------------------------------------------------------------

def test_healthz_and_readyz_answer_without_sign_in(app):
    client = app.test_client()
    assert client.get("/healthz").get_json() == {"status": "ok"}
    response = client.get("/readyz")
    assert response.status_code == 200 and response.get_json()["status"] == "ok"


def test_readyz_is_503_when_the_database_is_unreachable():
    app = make_app("postgresql://root@127.0.0.1:1/nowhere")
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert "database unreachable" in response.get_json()["problems"][0]


# two real gunicorn instances ------------------------------------------------------------

def holders_on_page(html: str) -> dict[str, str]:
    """Return {key name: holder application_name} as the status page shows them."""
    return dict(re.findall(r'<tr data-key="(\w+)">.*?data-holder="([^"]*)"', html, re.S))


@pytest.mark.slow
def test_two_instances_show_one_holder_per_key_and_the_other_standing_by(fleet):
    fleet.wait_settled()
    holders = {"publish": fleet.view.holder(PUBLISH_KEY), "plugins": fleet.view.holder(PLUGINS_KEY)}
    sessions = set(fleet.view.lock_sessions())
    for instance in fleet.instances:
        leaders = {k["name"]: k for k in fleet.api(instance, "/api/leaders")}
        for name, holder in holders.items():
            assert leaders[name]["holder"]["application_name"] == holder
            assert {s["application_name"] for s in leaders[name]["standbys"]} == sessions - {holder}
        page = WebSession(instance.url, fleet.ADMIN).get("/status/")
        assert holders_on_page(page) == holders
        for name in sessions:
            assert name in page  # every lock session is in the instances table
        # the fleet's connections by instance and role, from pg_stat_activity
        table = re.search(r'<table class="connections cards">.*?</table>', page, re.S).group(0)
        for other in fleet.instances:
            row = re.search(rf"<strong>{other.name}</strong></td>(.*?)</tr>", table, re.S)
            assert row and '<td data-label="lock">1</td>' in row.group(1)
        assert "usable connections in use (<code>max_connections</code> 100" in page


@pytest.mark.slow
def test_step_down_moves_leadership_to_the_standby(fleet):
    fleet.wait_settled()
    old = fleet.view.holder(PUBLISH_KEY)
    web = WebSession(fleet.instances[0].url, fleet.ADMIN)
    token = csrf_from(web.get("/status/publish/step-down"))
    page = web.post("/status/publish/step-down", {"csrf_token": token, "holder": old})
    assert f"{old} was asked to step down" in page
    new = wait_for(lambda: (h := fleet.view.holder(PUBLISH_KEY)) not in (None, old) and h, 15,
                   "the standby to take the publish key")
    assert holders_on_page(web.get("/status/"))["publish"] == new
    kinds = [(kind, holder, detail) for kind, holder, detail in fleet.view.query(
        "SELECT kind, holder, detail FROM leader_events WHERE key = %s ORDER BY id",
        (PUBLISH_KEY,))]
    asked = kinds.index(("step_down", old, f"by {fleet.ADMIN}"))
    assert ("released", old, "step down requested") in kinds[asked:]
    assert kinds[-1][:2] == ("acquired", new)


@pytest.mark.slow
def test_evict_moves_leadership_off_a_frozen_holder(fleet):
    fleet.wait_settled()
    frozen = fleet.view.holder(PUBLISH_KEY)
    web = WebSession(fleet.other_than(frozen).url, fleet.ADMIN)
    token = csrf_from(web.get("/status/publish/evict"))
    os.kill(pid_of(frozen), signal.SIGSTOP)
    try:
        page = web.post("/status/publish/evict", {"csrf_token": token, "holder": frozen})
        assert f"{frozen} was evicted" in page
        new = wait_for(lambda: (h := fleet.view.holder(PUBLISH_KEY)) not in (None, frozen) and h,
                       15, "the standby to take the publish key from the frozen holder")
        assert fleet.other_than(frozen).owns(new)  # the standby, not the frozen process
        evicted = fleet.view.query(
            "SELECT holder, detail FROM leader_events WHERE key = %s AND kind = 'evicted'",
            (PUBLISH_KEY,))
        assert evicted == [(frozen, f"by {fleet.ADMIN}")]
    finally:
        os.kill(pid_of(frozen), signal.SIGCONT)
    fleet.wait_settled()  # the thawed process reconnects and stands by


def test_pollers_share_a_snapshot_but_only_admins_get_the_action_links(app, auth):
    admin, viewer = auth.client("admin"), auth.client("viewer", email="v@example.com")
    for _ in range(2):  # the second round comes from the shared snapshot
        assert ">Actions</th>" in admin.get("/status/live").get_data(as_text=True)
        assert ">Actions</th>" not in viewer.get("/status/live").get_data(as_text=True)


def test_step_down_without_the_confirmed_holder_does_nothing(app, auth, pg_url):
    client = auth.client("admin")
    with holding(pg_url, "soloist:b:2", PUBLISH_KEY) as conn:
        record_term(app, PUBLISH_KEY, conn)
        token = csrf_token(client, "/status/publish/step-down")
        response = client.post("/status/publish/step-down", follow_redirects=True,
                               data={"csrf_token": token})
    assert "did not say which holder" in response.get_data(as_text=True)
    with app.app_context():
        assert not db.session.get(LeaderState, PUBLISH_KEY).step_down_requested


def test_a_lock_session_named_with_unicode_digits_is_not_taken_for_ours():
    from webapp.leadership.base import parse_identity

    assert parse_identity("soloist:web:²") == ("", None)
    assert parse_identity("soloist:web:42") == ("web", 42)


def test_a_session_name_breaks_only_at_its_colons_and_copies_whole(app):
    from webapp.views.status import session_name

    shown = str(session_name("soloist:ux-a:18342:abcdefgh"))
    assert shown.startswith('<span title="soloist:ux-a:18342:abcdefgh">')
    assert '<span class="nb">ux-a</span>:<wbr><span class="nb">18342</span>' in shown
    assert "&lt;" in str(session_name("soloist:<b>:1"))  # escaped, never markup
