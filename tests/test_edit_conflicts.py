"""A save refused because the post was saved since the form opened says who saved it, once:
"you, in another tab" or the person by name, with the diff from the version the form
started from to the saved one, and keeps what was typed (issue 37, finding 4)."""

import html

import sqlalchemy as sa

from tests.harness.editor_forms import created, opened, typed
from tests.harness.support import add_user, post_form, text
from webapp.extensions import db
from webapp.models import Post


def test_the_same_editor_in_two_tabs_is_told_it_was_them_once_with_the_diff(app, editor):
    post_id = created(app, "Intro.\nThe middle.\nThe end.")
    first_tab, second_tab = opened(editor, post_id), opened(editor, post_id)
    post_form(editor, f"/admin/posts/{post_id}",
              {**typed("Intro.\nThe better middle.\nThe end."), **first_tab})
    refused = post_form(editor, f"/admin/posts/{post_id}",
                        {**typed("Intro.\nThe middle.\nThe end.\nMy new ending."), **second_tab})
    page = text(refused)
    assert refused.status_code == 409
    assert page.count("You changed this post in another tab") == 1
    assert "Someone else" not in page and "after you opened it" not in page  # said once
    # the diff from the version this tab opened to the one the other tab saved
    assert "<del>The middle.</del>" in page.replace("<mark>", "").replace("</mark>", "")
    assert "<ins>The <mark>better</mark> middle.</ins>" in page
    assert "The end.\nMy new ending.</textarea>" in html.unescape(page)  # what was typed
    with app.app_context():
        body = db.session.scalar(sa.select(Post.body).where(Post.id == post_id))
    assert body == "Intro.\nThe better middle.\nThe end."
    assert "Replace it with this tab’s text" in page


def test_someone_else_is_named(app, auth, editor):
    add_user(app, "ada@example.com", "editor")
    post_id = created(app, "one")
    mine = opened(editor, post_id)
    ada = auth.client("editor", email="ada@example.com")
    post_form(ada, f"/admin/posts/{post_id}", {**typed("two"), **opened(ada, post_id)})
    page = text(post_form(editor, f"/admin/posts/{post_id}", {**typed("three"), **mine}))
    assert page.count("ada@example.com changed this post") == 1
    assert "<del>one</del>" in page.replace("<mark>", "").replace("</mark>", "")
    assert "in another tab" not in page


def test_a_schedule_form_from_before_my_own_change_in_another_tab_says_so(app, editor):
    post_id = created(app, "Body.")
    first_tab, second_tab = opened(editor, post_id), opened(editor, post_id)
    when = {"zone": "UTC", "unpublish_at": ""}
    done = post_form(editor, f"/admin/posts/{post_id}/schedule",
                     {**when, "publish_at": "2030-01-01T10:00", "version": first_tab["version"]})
    assert done.status_code == 303
    refused = post_form(editor, f"/admin/posts/{post_id}/schedule",
                        {**when, "publish_at": "2031-01-01T10:00",
                         "version": second_tab["version"]})
    page = text(refused)
    assert refused.status_code == 409
    assert page.count("You changed this post in another tab") == 1 and "Someone" not in page
    with app.app_context():
        assert db.session.scalar(sa.select(Post.publish_at)).year == 2030
