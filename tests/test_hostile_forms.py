"""Hostile values in every HTML form: never a 5xx, nothing half-written, what was typed kept.

Property-based (hypothesis): each form gets arbitrary text, control characters, huge
strings, impossible times, unknown zones and broken cron expressions. After any refused
request (4xx) the rows the form writes are as they were; a 422 shows the form again
with the text the user typed.
"""

import re
from datetime import UTC, datetime

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import escape
from werkzeug.datastructures import iter_multi_items

from tests.harness.support import PASSWORD, TIMER, csrf_token, new_post, text
from webapp.extensions import db
from webapp.models import Post, Timer, User, WebhookEndpoint
from webapp.posts import content_digest

BOUNDED = settings(max_examples=60, deadline=None, database=None, derandomize=True,
                   suppress_health_check=[HealthCheck.function_scoped_fixture,
                                          HealthCheck.too_slow])

# what a browser can send: any character but lone surrogates (they cannot be encoded)
CHARS = st.characters(exclude_categories=("Cs",))
CONTROL = st.sampled_from([chr(c) for c in range(32) if chr(c) not in "\t\n\r"]
                          + ["\x7f", "\ufffe", "\uffff", "\u202e", "\u200b", "\ufeff"])
ODD = st.sampled_from(["", " ", "<script>alert(1)</script>", "' OR 1=1 --", "%00", "{{ 7*7 }}",
                       "../../etc/passwd", "\r\n\r\n", "null", "-1", "0", "1e309", "NaN",
                       "99999999999999999999", "２", "٣", "😀" * 50])
TEXT = st.text(CHARS, max_size=40)
WITH_CONTROL = st.builds(lambda a, c, b: a + c + b, st.text(CHARS, max_size=8), CONTROL,
                         st.text(CHARS, max_size=8))


def repeated(sizes: list[int]) -> st.SearchStrategy[str]:
    """Return a strategy of one character repeated to one of sizes."""
    return st.builds(lambda c, n: c * n, st.sampled_from(["a", "<", "é", '"', "\x0b", " "]),
                     st.sampled_from(sizes))


LONG = [101, 121, 201, 2_001, 200_001]
FIELD = st.one_of(TEXT, WITH_CONTROL, repeated(LONG), ODD)  # one of many: within the limit
HOSTILE = st.one_of(TEXT, WITH_CONTROL, repeated([*LONG, 2_200_000]), ODD)  # or past it: 413
TIMES = st.one_of(FIELD, st.sampled_from([
    "2026-13-45T25:61", "0000-01-01T00:00", "0001-01-01T00:00", "9999-12-31T23:59",
    "2026-03-29T02:30", "2026-03-29 02:30", "2030-01-01T09:00+99:00", "2030-01-01T09:00Z",
    "2030-02-30T00:00", "now", "2030-01-01T09:00", "2000-01-01T00:00"]))
ZONES = st.one_of(FIELD, st.sampled_from([
    "UTC", "Europe/Paris", "Mars/Olympus", "europe/paris", "Etc/GMT+14", "UTC ", "localtime",
    "America/Argentina/ComodRivadavia", "posixrules", "Factory", "/etc/localtime"]))
CRONS = st.one_of(FIELD, st.sampled_from([
    "* * * * * *", "61 * * * *", "*/0 * * * *", "0 0 31 2 *", "0 0 30 2 *", "@hourly",
    "L W * * *", "0-59/99999999999 * * * *", "* * * * 8", "0 9 * * 1-5", "1-5/0 * * * *",
    "* * 0 * *", "9999999999999999999 * * * *", ",,,, * * * *", "0 " * 70 + "*"]))
NUMBERS = st.one_of(FIELD, st.integers(-10**20, 10**20).map(str))


# the bytes a browser (and werkzeug's test client) sends for a form, made in C: the test
# client quotes byte by byte in Python, most of this module's time (the 2.2 MB values)
UNQUOTED = re.compile(rb"[^A-Za-z0-9_.~!$'()*,/:;?@ -]+")


def quoted(value: str) -> bytes:
    """Return value as application/x-www-form-urlencoded does, as werkzeug quotes it."""
    encoded = UNQUOTED.sub(lambda run: b"%" + run[0].hex("%").upper().encode(), value.encode())
    return encoded.replace(b" ", b"+")


def form_body(data: dict) -> bytes:
    """Return a form's urlencoded body (a list value: the field repeated)."""
    return b"&".join(quoted(name) + b"=" + quoted(value)
                     for name, value in iter_multi_items(data) if value is not None)


def submit(client, token: str, path: str, data: dict):
    """POST a form with the session's CSRF token; fail on any 5xx."""
    response = client.post(path, data=form_body({**data, "csrf_token": token}),
                           content_type="application/x-www-form-urlencoded")
    assert response.status_code < 500, (path, data, text(response)[:500])
    return response


def rows(app, model, *columns) -> list[tuple]:
    """Return every row of model as tuples of columns, by id."""
    with app.app_context():
        found = db.session.execute(sa.select(*columns).order_by(model.id)).all()
        db.session.remove()
        return [tuple(row) for row in found]


def kept(response, *typed: str) -> None:
    """Assert a refused form (422) shows each value typed, escaped as the page does."""
    if response.status_code == 422:
        page = text(response)
        for value in typed:
            assert str(escape(value)) in page, value[:80]


def signed_in(auth, role: str):
    """Return (client, CSRF token) signed in as role."""
    client = auth.client(role)
    return client, csrf_token(client)


POST_COLUMNS = (Post.id, Post.title, Post.slug, Post.body, Post.status, Post.version)


def test_the_new_post_form_survives_hostile_text(app, auth):
    client, token = signed_in(auth, "editor")

    @BOUNDED
    @given(title=HOSTILE, slug=HOSTILE, body=HOSTILE)
    def attempt(title, slug, body):
        before = rows(app, Post, *POST_COLUMNS)
        response = submit(client, token, "/admin/posts/new",
                          {"title": title, "slug": slug, "body": body})
        if 400 <= response.status_code < 500:
            assert rows(app, Post, *POST_COLUMNS) == before
        kept(response, title, slug, body)

    attempt()


def test_the_post_edit_form_survives_hostile_text(app, auth):
    client, token = signed_in(auth, "editor")
    post_id = new_post(app, "Steady")

    @BOUNDED
    @given(title=HOSTILE, slug=HOSTILE, body=HOSTILE, version=NUMBERS)
    def attempt(title, slug, body, version):
        before = rows(app, Post, *POST_COLUMNS)
        _, old_title, old_slug, old_body, _, current = before[0]
        digest = content_digest(old_title, old_slug, old_body)
        for form_version in (version, str(current)):
            response = submit(client, token, f"/admin/posts/{post_id}", {
                "title": title, "slug": slug, "body": body, "version": form_version,
                "digest": digest})
            if 400 <= response.status_code < 500:
                assert rows(app, Post, *POST_COLUMNS) == before
            kept(response, title, body)
            before = rows(app, Post, *POST_COLUMNS)

    attempt()


def test_autosave_survives_hostile_text_and_the_pages_offering_it_back_too(app, auth):
    # what autosave keeps is shown again (the offer, its diff, the restored form): a value
    # it took must never break those pages, nor change the post
    client, token = signed_in(auth, "editor")
    post_id = new_post(app, "Steady")

    @BOUNDED
    @given(title=FIELD, slug=FIELD, body=FIELD, publish_at=TIMES, zone=ZONES,
           version=NUMBERS, digest=FIELD)
    def attempt(title, slug, body, publish_at, zone, version, digest):
        before = rows(app, Post, *POST_COLUMNS)
        typed = {"title": title, "slug": slug, "body": body, "publish_at": publish_at,
                 "zone": zone}
        for path in (f"/admin/posts/{post_id}", "/admin/posts/new"):
            submit(client, token, f"{path}/autosave",
                   {**typed, "version": version, "digest": digest})
            for shown in (path, f"{path}?restore=1"):
                page = client.get(shown)
                assert page.status_code == 200, (shown, text(page)[:300])
                assert "<script>alert" not in text(page)
        assert rows(app, Post, *POST_COLUMNS) == before

    attempt()


def test_a_new_post_with_a_publish_time_survives_hostile_values(app, auth):
    client, token = signed_in(auth, "editor")

    @BOUNDED
    @given(title=st.one_of(st.just("Dated"), FIELD), publish_at=TIMES, zone=ZONES)
    def attempt(title, publish_at, zone):
        before = rows(app, Post, *POST_COLUMNS, Post.publish_at)
        response = submit(client, token, "/admin/posts/new", {
            "title": title, "slug": "", "body": "", "publish_at": publish_at, "zone": zone})
        if 400 <= response.status_code < 500:
            assert rows(app, Post, *POST_COLUMNS, Post.publish_at) == before
        kept(response, title, publish_at.strip())  # times are read without their spaces
        with app.app_context():  # a success leaves the slug free for the next draw
            db.session.execute(sa.delete(Post))
            db.session.commit()

    attempt()


def test_the_calendar_move_form_survives_hostile_values(app, auth):
    client, token = signed_in(auth, "editor")
    post_id = new_post(app, "Steady", "scheduled",
                       publish_at=datetime(2031, 1, 14, 8, tzinfo=UTC))

    @BOUNDED
    @given(day=st.one_of(st.just("2031-01-20"), FIELD), at=st.one_of(st.just("09:00"), TIMES),
           zone=ZONES, version=st.one_of(st.just("1"), NUMBERS),
           page=st.one_of(st.just("2031-01-01"), FIELD))
    def attempt(day, at, zone, version, page):
        before = rows(app, Post, *POST_COLUMNS, Post.publish_at)
        response = submit(client, token, f"/admin/calendar/posts/{post_id}/move", {
            "date": day, "time": at, "zone": zone, "version": version, "page": page,
            "view": page, "timers": page})
        if 400 <= response.status_code < 500:
            assert rows(app, Post, *POST_COLUMNS, Post.publish_at) == before
        if response.status_code == 422 and page == "2031-01-01" and version == "1":
            kept(response, day.strip(), at.strip())  # in the post's form, on its page

    attempt()


TIMER_COLUMNS = (Timer.id, Timer.name, Timer.plugin, Timer.action, Timer.params, Timer.kind,
                 Timer.every, Timer.unit, Timer.cron, Timer.run_at, Timer.start_at,
                 Timer.timezone, Timer.misfire, Timer.grace_seconds, Timer.max_runtime_seconds,
                 Timer.max_failures, Timer.next_run_at, Timer.paused)
TIMER_FIELDS = {
    "name": HOSTILE,
    "action": st.one_of(st.sampled_from(["sitemap.rebuild", "housekeeping.trim",
                                         "webhooks.deliver", "nope.nope", "sitemap."]),
                        FIELD),
    "params": st.one_of(st.sampled_from(["{}", '{"limit": 5}', '{"limit": -1}', "[]",
                                         '{"limit": "x"}', '{"nope": 1}', "[" * 5000]),
                        FIELD),
    "kind": st.one_of(st.sampled_from(["every", "cron", "once"]), FIELD),
    "every": NUMBERS, "unit": st.one_of(st.sampled_from(["seconds", "minutes", "days"]),
                                        FIELD),
    "cron": CRONS, "run_at": TIMES, "start_at": TIMES, "timezone": ZONES,
    "misfire": st.one_of(st.sampled_from(["run_once", "skip"]), FIELD),
    "grace_seconds": NUMBERS, "max_runtime_seconds": NUMBERS, "max_failures": NUMBERS,
}
# a valid timer with some fields replaced: each refusal, alone or together, and successes
TIMER_FORM = st.fixed_dictionaries({}, optional=TIMER_FIELDS).map(lambda c: {**TIMER, **c})


def _timer_kept(response, form: dict) -> None:
    kept(response, form["name"], form["params"], form["cron"], form["timezone"])


def test_the_new_timer_form_survives_hostile_values(app, auth):
    client, token = signed_in(auth, "editor")

    @BOUNDED
    @given(form=TIMER_FORM)
    def attempt(form):
        before = rows(app, Timer, *TIMER_COLUMNS)
        response = submit(client, token, "/admin/timers/new", form)
        if 400 <= response.status_code < 500:
            assert rows(app, Timer, *TIMER_COLUMNS) == before
        _timer_kept(response, form)

    attempt()


def test_the_timer_edit_form_survives_hostile_values(app, auth):
    client, token = signed_in(auth, "editor")
    assert submit(client, token, "/admin/timers/new", TIMER).status_code == 303
    timer_id = rows(app, Timer, Timer.id)[0][0]

    @BOUNDED
    @given(form=TIMER_FORM)
    def attempt(form):
        before = rows(app, Timer, *TIMER_COLUMNS)
        response = submit(client, token, f"/admin/timers/{timer_id}/edit", form)
        if 400 <= response.status_code < 500:
            assert rows(app, Timer, *TIMER_COLUMNS) == before
        _timer_kept(response, form)

    attempt()


SCHEDULE_FIELDS = ("kind", "every", "unit", "cron", "run_at", "start_at", "timezone")


def test_the_next_runs_preview_and_the_post_time_hint_survive_hostile_values(app, auth):
    client, _token = signed_in(auth, "editor")

    @BOUNDED
    @given(form=TIMER_FORM, publish_at=TIMES, zone=ZONES)
    def attempt(form, publish_at, zone):
        query = {name: form[name] for name in SCHEDULE_FIELDS}
        preview = client.get("/admin/timers/next-runs", query_string=form_body(query).decode())
        nul = any("\x00" in str(v) for v in query.values())  # refused before any view
        assert preview.status_code in ((400,) if nul else (200, 422)), (
            query, text(preview)[:500])
        hint = client.get("/admin/posts/when", query_string=form_body(
            {"publish_at": publish_at, "zone": zone}).decode())
        nul = "\x00" in publish_at or "\x00" in zone
        assert hint.status_code == (400 if nul else 200), (publish_at, zone, text(hint)[:500])
        if nul:
            assert "NUL character" in text(hint)

    attempt()


WEBHOOK_COLUMNS = (WebhookEndpoint.id, WebhookEndpoint.url, WebhookEndpoint.events,
                   WebhookEndpoint.description, WebhookEndpoint.active)
# literal addresses and localhost only: a host name would make the check ask DNS
URLS = st.one_of(
    st.sampled_from(["https://93.184.216.34/hook", "http://127.0.0.1/hook", "http://10.0.0.1/",
                     "ftp://93.184.216.34/", "https://[::1]/", "https://localhost/",
                     "javascript:alert(1)", "https://93.184.216.34:99999/", "//93.184.216.34",
                     "https://user:pass@93.184.216.34/", "https://0x7f.1/"]),
    st.builds(lambda path: "https://93.184.216.34/" + path, HOSTILE),
    HOSTILE.filter(lambda s: ":" not in s and "." not in s))
EVENTS = st.lists(st.one_of(st.sampled_from(["post.published", "post.unpublished", "bogus"]),
                            HOSTILE), max_size=3)


def test_the_webhook_form_survives_hostile_values(app, auth):
    client, token = signed_in(auth, "admin")

    @BOUNDED
    @given(url=URLS, events=EVENTS, secret=HOSTILE, description=HOSTILE)
    def attempt(url, events, secret, description):
        before = rows(app, WebhookEndpoint, *WEBHOOK_COLUMNS)
        response = submit(client, token, "/admin/webhooks/", {
            "url": url, "events": events, "secret": secret, "description": description})
        if 400 <= response.status_code < 500:
            assert rows(app, WebhookEndpoint, *WEBHOOK_COLUMNS) == before
        kept(response, url.strip(), description.strip())

    attempt()


USER_COLUMNS = (User.id, User.email, User.role, User.active, User.timezone, User.password_hash)
EMAILS = st.one_of(HOSTILE, st.builds(lambda a, b: f"{a}@{b}.example", HOSTILE, HOSTILE),
                   st.sampled_from(["ada@example.com", "ADA@example.com ", "a@b", "@", "a@@b.c",
                                    "admin@example.com"]))


def test_the_invite_form_survives_hostile_values(app, auth):
    client, token = signed_in(auth, "admin")

    @BOUNDED
    @given(email=EMAILS, role=st.one_of(st.sampled_from(["admin", "editor", "viewer"]),
                                        HOSTILE))
    def attempt(email, role):
        before = rows(app, User, *USER_COLUMNS)
        response = submit(client, token, "/admin/users/", {"email": email, "role": role})
        if 400 <= response.status_code < 500:
            assert rows(app, User, *USER_COLUMNS) == before
        kept(response, email)

    attempt()


def test_the_settings_form_survives_hostile_values(app, auth):
    client, token = signed_in(auth, "editor")

    @BOUNDED
    @given(zone=ZONES, current=st.one_of(st.just(PASSWORD), HOSTILE), new=HOSTILE,
           confirm=HOSTILE)
    def attempt(zone, current, new, confirm):
        before = rows(app, User, *USER_COLUMNS)
        response = submit(client, token, "/settings", {
            "timezone": zone, "current_password": current, "new_password": new,
            "confirm_password": confirm})
        if 400 <= response.status_code < 500:
            assert rows(app, User, *USER_COLUMNS) == before
        kept(response, zone.strip())

    attempt()
