"""An unexpected error shows the error page, and what is logged carries no bound values."""

import pytest
import sqlalchemy as sa
from flask_login import current_user

from tests.harness.support import text
from webapp.extensions import db
from webapp.models import User


@pytest.fixture
def app(fresh_app):
    """An app of this module's own: its first test adds a route."""
    return fresh_app


def test_an_unexpected_error_after_a_failed_flush_still_shows_the_error_page(app, client, auth):
    @app.get("/review-failed-flush")
    def failed_flush():
        db.session.commit()  # expires the signed-in user, as views that commit do
        db.session.add(User(email=current_user.email, role="viewer", active=True))
        db.session.flush()  # a duplicate email: the session now needs a rollback

    auth.login("editor")
    response = client.get("/review-failed-flush")
    assert response.status_code == 500
    assert "Something went wrong on our side" in text(response)
    assert "editor@example.com" in text(response)  # the page still knows who is signed in


def test_a_database_error_does_not_carry_the_statements_values_into_the_log(app):
    with app.app_context(), pytest.raises(sa.exc.DBAPIError) as caught:
        db.session.execute(sa.text("SELECT CAST(:secret AS text), 1 / 0"),
                           {"secret": "whsec-do-not-log"})
    assert "whsec-do-not-log" not in str(caught.value)
