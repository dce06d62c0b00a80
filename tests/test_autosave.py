"""Autosave: what an editor types is kept by the server beside the post, offered back with
a diff when the post (or New post) is opened again, restored or discarded; never a version
of the post, never anyone else's; and the API's side of it."""

import sqlalchemy as sa

from tests.harness.editor_forms import opened, typed
from tests.harness.support import count, new_post, post_form, text
from webapp.extensions import db
from webapp.models import Post, PostAutosave, PostRevision
from webapp.posts import MAX_BODY_BYTES, content_digest


def post_row(app, post_id: int) -> Post:
    with app.app_context():
        post = db.session.get(Post, post_id)
        db.session.expunge(post)
        return post


def test_typed_text_is_kept_and_offered_back_with_a_diff_then_restored(app, editor):
    post_id = new_post(app, body="First line.\nSecond line.")
    revisions = count(app, PostRevision)
    kept = post_form(editor, f"/admin/posts/{post_id}/autosave",
                     {**typed("First line.\nSecond line, longer.\nA third."), **opened(editor,
                                                                                    post_id)})
    assert kept.status_code == 200 and kept.get_json()["said"].startswith("Saved a draft ")
    # never a version of the post: the post and its history are as they were
    assert (post_row(app, post_id).body, post_row(app, post_id).version) == (
        "First line.\nSecond line.", 1)
    assert count(app, PostRevision) == revisions
    page = text(editor.get(f"/admin/posts/{post_id}"))
    assert "Unsaved changes from" in page and "were kept" in page
    assert "based on an older version" not in page
    assert "<ins>Second line<mark>, longer</mark>.</ins>" in page  # the diff, word marked
    assert ">Restore</button>" in page and ">Discard</button>" in page
    restored = text(editor.get(f"/admin/posts/{post_id}?restore=1"))
    assert "are back in the form" in restored and "Unsaved changes from" not in restored
    assert "Second line, longer.\nA third.</textarea>" in restored
    assert "data-unsaved" in restored  # leaving asks first, as for any unsaved text


def test_save_deletes_the_autosave_and_discard_forgets_it(app, editor):
    post_id = new_post(app, body="old")
    form = opened(editor, post_id)
    post_form(editor, f"/admin/posts/{post_id}/autosave", {**typed("new"), **form})
    assert count(app, PostAutosave) == 1
    saved = post_form(editor, f"/admin/posts/{post_id}", {**typed("new"), **form})
    assert saved.status_code == 303 and count(app, PostAutosave) == 0
    assert "were kept" not in text(editor.get(f"/admin/posts/{post_id}"))
    post_form(editor, f"/admin/posts/{post_id}/autosave", {**typed("newer"),
                                                           **opened(editor, post_id)})
    gone = post_form(editor, f"/admin/posts/{post_id}/autosave/discard")
    assert gone.status_code == 303 and count(app, PostAutosave) == 0
    assert post_row(app, post_id).body == "new"
    # text the same as the saved post's is nothing unsaved: nothing is kept
    same = post_form(editor, f"/admin/posts/{post_id}/autosave", {**typed("new"),
                                                                  **opened(editor, post_id)})
    assert same.get_json()["said"] == "Nothing unsaved" and count(app, PostAutosave) == 0


def test_an_autosave_typed_on_an_older_version_says_so_and_never_overwrites_it(app, auth,
                                                                                  editor):
    post_id = new_post(app, body="base")
    form = opened(editor, post_id)
    post_form(editor, f"/admin/posts/{post_id}/autosave", {**typed("mine"), **form})
    other = auth.client("editor", email="other@example.com")
    post_form(other, f"/admin/posts/{post_id}", {**typed("theirs"), **opened(other, post_id)})
    page = text(editor.get(f"/admin/posts/{post_id}"))
    assert "were kept" in page and "based on an older version" in page
    assert "were kept" not in text(other.get(f"/admin/posts/{post_id}"))  # mine alone
    # restored and saved, it is refused as any stale form is: their version stays
    restored = text(editor.get(f"/admin/posts/{post_id}?restore=1"))
    version = restored.split('name="version" value="')[1].split('"')[0]
    refused = post_form(editor, f"/admin/posts/{post_id}", {**typed("mine"), **form})
    assert version == form["version"] and refused.status_code == 409
    assert "other@example.com changed this post" in text(refused)
    assert post_row(app, post_id).body == "theirs"


def test_new_posts_text_survives_and_goes_when_it_is_saved(app, editor):
    kept = post_form(editor, "/admin/posts/new/autosave",
                     typed("A new post's body.", title="Brand new", publish_at="2030-01-02T09:00",
                           zone="Europe/Paris"))
    assert kept.status_code == 200 and count(app, Post) == 0
    page = text(editor.get("/admin/posts/new"))
    assert "were kept" in page and "Title: Brand new" in page
    assert "A new post&#39;s body.</p>" in page
    restored = text(editor.get("/admin/posts/new?restore=1"))
    assert 'value="Brand new"' in restored and "A new post&#39;s body.</textarea>" in restored
    assert 'value="2030-01-02T09:00"' in restored and 'value="Europe/Paris"' in restored
    saved = post_form(editor, "/admin/posts/new", typed("A new post's body.", title="Brand new",
                                                        slug=""))
    assert saved.status_code == 303 and count(app, PostAutosave) == 0


def test_only_its_editor_sees_it_and_bad_input_keeps_nothing(app, auth, editor, client):
    post_id = new_post(app, body="old")
    too_big = post_form(editor, f"/admin/posts/{post_id}/autosave",
                        typed("x" * (MAX_BODY_BYTES + 1)))
    assert too_big.status_code == 422 and too_big.get_json()["field"] == "body"
    no_token = editor.post(f"/admin/posts/{post_id}/autosave", data=typed("sneaky"))
    assert no_token.status_code == 400 and count(app, PostAutosave) == 0
    missing = post_form(editor, "/admin/posts/2147483647/autosave", typed("x"))
    assert missing.status_code == 404
    viewer = auth.client("viewer")
    assert post_form(viewer, f"/admin/posts/{post_id}/autosave", typed("x")).status_code == 403
    assert count(app, PostAutosave) == 0


def test_the_api_keeps_shows_and_discards_the_token_users_autosave(app, api):
    post_id = new_post(app, body="old")
    assert api("GET", f"/api/posts/{post_id}/autosave").status_code == 404
    put = api("PUT", f"/api/posts/{post_id}/autosave", body={"body": "typed", "version": 1})
    assert put.status_code == 200 and put.get_json()["kept"] is True
    shown = api("GET", f"/api/posts/{post_id}/autosave").get_json()
    assert (shown["body"], shown["title"], shown["based_on_older_version"]) == (
        "typed", "Hello", False)
    assert api("GET", f"/api/posts/{post_id}/autosave", role="admin").status_code == 404
    assert api("PUT", f"/api/posts/{post_id}/autosave", role="viewer",
               body={"body": "x"}).status_code == 403
    bad = api("PUT", f"/api/posts/{post_id}/autosave", body={"version": 7})
    assert bad.status_code == 422 and bad.get_json()["field"] == "version"
    assert api("DELETE", f"/api/posts/{post_id}/autosave").get_json() == {"discarded": True}
    assert post_row(app, post_id).body == "old"


def test_a_forms_nonsense_version_or_digest_is_not_stored(app, editor):
    post_id = new_post(app, body="old")
    kept = post_form(editor, f"/admin/posts/{post_id}/autosave",
                     {**typed("new"), "version": "99999999999", "digest": "' or 1=1"})
    assert kept.status_code == 200
    with app.app_context():
        row = db.session.scalar(sa.select(PostAutosave))
        assert (row.base_version, row.base_digest) == (1, content_digest("Hello", "hello", "old"))


def test_a_pasted_nul_character_is_refused_naming_its_field_to_the_autosave_script(app, editor):
    # the script asks for JSON: a 400 that names no field reads as "signed out", so this one
    # names the field the text is in
    post_id = new_post(app, body="old")
    refused = post_form(editor, f"/admin/posts/{post_id}/autosave", typed("pasted\x00here"),
                        headers={"Accept": "application/json"})
    assert refused.status_code == 400 and refused.get_json()["field"] == "body"
    assert "NUL character" in refused.get_json()["error"] and count(app, PostAutosave) == 0
    page = post_form(editor, f"/admin/posts/{post_id}/autosave", typed("pasted\x00here"))
    assert page.status_code == 400 and "NUL character" in text(page)  # a form: the page


def test_nobody_discards_or_reads_another_editors_autosave_by_page_or_api(app, api, auth,
                                                                         editor):
    post_id = new_post(app, body="old")
    post_form(editor, f"/admin/posts/{post_id}/autosave", {**typed("mine, unsaved"),
                                                           **opened(editor, post_id)})
    other = auth.client("editor", email="other@example.com")
    assert post_form(other, f"/admin/posts/{post_id}/autosave/discard").status_code == 303
    assert "mine, unsaved" not in text(other.get(f"/admin/posts/{post_id}?restore=1"))
    assert api("DELETE", f"/api/posts/{post_id}/autosave", role="admin").get_json() == {
        "discarded": False}
    assert api("GET", f"/api/posts/{post_id}/autosave", role="admin").status_code == 404
    assert "mine, unsaved" in text(editor.get(f"/admin/posts/{post_id}?restore=1"))
