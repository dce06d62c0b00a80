"""A post's history: every saved version kept, compared, restored, and pruned with care."""

import re
from datetime import UTC, datetime

import sqlalchemy as sa

from tests.harness.support import new_post, post_form, text
from webapp.extensions import db
from webapp.models import AuditEvent, Post, PostRevision
from webapp.plugins import housekeeping
from webapp.posts import revisions


def _create(client, title="Prices", body="The price is 10 euros.\n\nSee you there.") -> int:
    response = post_form(client, "/admin/posts/new", {"title": title, "slug": "", "body": body})
    assert response.status_code == 303, text(response)[:400]
    return int(response.headers["Location"].rstrip("/").rsplit("/", 1)[1])


def _save(client, app, post_id: int, **changes) -> None:
    with app.app_context():
        post = db.session.get(Post, post_id)
        form = {"title": post.title, "slug": post.slug, "body": post.body,
                "version": post.version, "digest": ""}
    response = post_form(client, f"/admin/posts/{post_id}", {**form, **changes})
    assert response.status_code == 303, text(response)[:400]


def _revisions(app, post_id: int) -> list[tuple]:
    with app.app_context():
        return db.session.execute(
            sa.select(PostRevision.title, PostRevision.body, PostRevision.author,
                      PostRevision.reason).where(PostRevision.post_id == post_id)
            .order_by(PostRevision.id)).all()


def test_every_save_keeps_the_version_it_replaced_with_who_and_when(app, auth):
    client = auth.client("editor")
    post_id = _create(client)
    _save(client, app, post_id, body="The price is 12 euros.\n\nSee you there.")
    _save(client, app, post_id, slug="prices-2026")  # the slug alone: no new version
    kept = _revisions(app, post_id)
    assert [(r.body.split()[3], r.author, r.reason) for r in kept] == [
        ("10", "editor@example.com", "create"), ("12", "editor@example.com", "edit")]
    page = text(client.get(f"/admin/posts/{post_id}/history"))
    assert "2 versions" in page and page.count("<td>editor@example.com</td>") == 2
    assert ">current</span>" in page


def test_two_versions_compare_as_a_readable_diff_words_marked_not_only_colour(app, auth):
    client = auth.client("editor")
    post_id = _create(client)
    _save(client, app, post_id, title="Sale prices",
          body="The price is 12 euros.\n\nSee you there.\n\nBring a friend.")
    with app.app_context():
        older, newer = db.session.scalars(sa.select(PostRevision.id).where(
            PostRevision.post_id == post_id).order_by(PostRevision.id)).all()
    page = text(client.get(f"/admin/posts/{post_id}/compare?a={newer}&b={older}"))  # any order
    assert "Title: <del>Prices</del> → <ins>Sale prices</ins>" in page
    assert re.search(r"Removed: </span><del>The price is <mark>10</mark> euros\.</del>", page)
    assert re.search(r"Added: </span><ins>The price is <mark>12</mark> euros\.</ins>", page)
    assert re.search(r"Added: </span><ins>Bring a friend\.</ins>", page)
    assert '<td class="sign" aria-hidden="true">−</td>' in page  # a sign, not a colour alone
    hostile = _create(client, "Hostile", "<script>alert(1)</script>")
    _save(client, app, hostile, body="<img src=x onerror=alert(1)>")
    with app.app_context():
        first = db.session.scalar(sa.select(sa.func.min(PostRevision.id))
                                  .where(PostRevision.post_id == hostile))
    page = text(client.get(f"/admin/posts/{hostile}/compare?a={first}"))
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "onerror=</mark>alert(1)&gt;" in page  # escaped, words marked


def test_restoring_an_old_version_makes_a_new_version_and_is_audited(app, auth):
    client = auth.client("editor")
    post_id = _create(client)
    _save(client, app, post_id, title="Oops", body="A bad save.")
    with app.app_context():
        first = db.session.scalar(sa.select(sa.func.min(PostRevision.id))
                                  .where(PostRevision.post_id == post_id))
        version = db.session.get(Post, post_id).version
    shown = text(client.get(f"/admin/posts/{post_id}/history/{first}"))
    assert "Restore this version" in shown and "The price is 10 euros." in shown
    response = post_form(client, f"/admin/posts/{post_id}/history/{first}/restore",
                         {"version": version})
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/{post_id}")
    with app.app_context():
        post = db.session.get(Post, post_id)
        assert (post.title, post.body) == ("Prices", "The price is 10 euros.\n\nSee you there.")
        audit = db.session.scalars(sa.select(AuditEvent).where(
            AuditEvent.action == "post.restore")).one()
        assert f'"restored": {first}' in audit.detail
    kept = _revisions(app, post_id)
    assert [r.reason for r in kept] == ["create", "edit", "restore"]
    assert kept[0][:2] == kept[2][:2]


def test_a_restore_from_a_page_opened_before_another_save_changes_nothing(app, auth):
    client = auth.client("editor")
    post_id = _create(client)
    with app.app_context():
        first = db.session.scalar(sa.select(sa.func.min(PostRevision.id))
                                  .where(PostRevision.post_id == post_id))
        version = db.session.get(Post, post_id).version
    _save(client, app, post_id, body="Someone else's newer text.")
    _save(client, app, post_id, body="And another.")
    response = post_form(client, f"/admin/posts/{post_id}/history/{first}/restore",
                         {"version": version}, follow_redirects=True)
    assert "nothing was restored" in text(response)
    with app.app_context():
        assert db.session.get(Post, post_id).body == "And another."
    assert len(_revisions(app, post_id)) == 3


def test_a_version_of_another_post_or_none_at_all_is_not_found(app, auth):
    client = auth.client("editor")
    mine, other = _create(client), _create(client, "Other")
    with app.app_context():
        theirs = db.session.scalar(sa.select(PostRevision.id)
                                   .where(PostRevision.post_id == other))
    assert client.get(f"/admin/posts/{mine}/history/{theirs}").status_code == 404
    assert client.get(f"/admin/posts/{mine}/history/99999999").status_code == 404
    assert client.get(f"/admin/posts/{mine}/compare?a={theirs}").status_code == 404
    assert post_form(client, f"/admin/posts/{mine}/history/{theirs}/restore",
                     {"version": 1}).status_code == 404


def test_viewers_see_no_history(app, auth):
    post_id = new_post(app)
    assert auth.client("viewer").get(f"/admin/posts/{post_id}/history").status_code == 403


def test_housekeeping_keeps_the_last_versions_and_every_one_readers_saw(app, auth):
    app.config["REVISIONS_KEEP"] = 3
    client = auth.client("editor")
    post_id = _create(client, body="v0")
    with app.app_context():
        db.session.execute(sa.update(Post).where(Post.id == post_id)
                           .values(status="published"))  # what readers see from here on
        db.session.commit()
    for n in range(1, 4):
        _save(client, app, post_id, body=f"v{n} live")
    with app.app_context():
        db.session.execute(sa.update(Post).where(Post.id == post_id).values(status="draft"))
        db.session.commit()
    for n in range(4, 9):
        _save(client, app, post_id, body=f"v{n} draft")
    with app.app_context():
        counts = housekeeping.trim(datetime.now(UTC))
    assert counts["post revisions"] == 3  # v0 (never live) and v4, v5
    assert [r.body for r in _revisions(app, post_id)] == [
        "v1 live", "v2 live", "v3 live", "v6 draft", "v7 draft", "v8 draft"]


def test_a_diff_pairs_replaced_lines_and_marks_the_words_that_changed():
    hunks = revisions.diff("a\nb\nthe cat sat\nc", "a\nb\nthe dog sat\nc\nd")
    assert len(hunks) == 1
    changed = [(line.kind, line.parts) for line in hunks[0] if line.kind != "same"]
    assert changed == [
        ("removed", [(False, "the "), (True, "cat"), (False, " sat")]),
        ("added", [(False, "the "), (True, "dog"), (False, " sat")]),
        ("added", [(False, "d")]),
    ]
    assert revisions.diff("same", "same") == []


def test_the_post_page_lists_its_latest_versions_with_a_way_to_the_whole_history(app, auth):
    client = auth.client("editor")
    post_id = _create(client)
    for n in range(6):
        _save(client, app, post_id, body=f"Take {n}.")
    page = text(client.get(f"/admin/posts/{post_id}"))
    versions = page[page.index('id="h-versions"'):]
    assert versions.count("/history/") == 5  # the latest five
    assert "History: all 7 versions, compare, restore" in versions


def test_a_long_paragraph_marks_only_the_words_that_changed():
    words = [f"w{i}" for i in range(1000)]  # about 5 kB on one line
    edited = [*words[:100], "changed", *words[101:700], "also", *words[701:]]
    removed, added = (line for line in revisions.diff(" ".join(words), " ".join(edited))[0])
    assert [text for marked, text in removed.parts if marked] == ["w100", "w700"]
    assert [text for marked, text in added.parts if marked] == ["changed", "also"]
    assert "".join(text for _marked, text in added.parts) == " ".join(edited)
