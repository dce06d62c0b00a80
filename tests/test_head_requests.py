"""HEAD runs a GET view: it answers like GET and never takes the POST branch.

No CSRF check guards a HEAD request, so it must change nothing.
"""

import pytest
import sqlalchemy as sa

from tests.harness.cluster import PUBLISH_KEY, holding
from tests.harness.support import count, record_term
from webapp.extensions import db
from webapp.models import LeaderEvent, LeaderState, LoginFailure, Post


@pytest.mark.parametrize("action", ["step-down", "evict"])
def test_a_head_request_never_steps_down_or_evicts_a_leader(app, client, auth, pg_url, action: str):
    auth.login("admin")
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY) as conn:
        record_term(app, PUBLISH_KEY, conn, term=3)
        response = client.head(f"/status/publish/{action}")
        assert response.status_code == 200
        assert conn.execute("SELECT 1").fetchone() == (1,)  # not terminated
    with app.app_context():
        assert not db.session.get(LeaderState, PUBLISH_KEY).step_down_requested
        assert db.session.scalar(sa.select(sa.func.count(LeaderEvent.id))) == 0


def test_a_head_request_on_the_sign_in_page_is_not_a_failed_sign_in(app, client):
    assert client.head("/login").status_code == 200
    assert count(app, LoginFailure) == 0


def test_head_requests_on_edit_forms_answer_like_get(app, client, auth):
    auth.login("editor")
    with app.app_context():
        post = Post(title="Kept", slug="kept", body="", status="draft", version=1)
        db.session.add(post)
        db.session.commit()
        post_id = post.id
    assert client.head(f"/admin/posts/{post_id}").status_code == 200
    assert client.head("/admin/timers/new").status_code == 200
