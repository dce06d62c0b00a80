"""What an address may ask for before it proves anything is bounded: failed API tokens and
anonymous passkey challenges (one stored row each) answer 429 past their allowance, and
another address is not held up."""

import sqlalchemy as sa

from tests.harness.support import count, csrf_token
from webapp.extensions import db
from webapp.models import RateLimitHit, WebAuthnChallenge

GUESSER, NEIGHBOUR = "203.0.113.7", "198.51.100.2"


def _from(address: str) -> dict:
    return {"environ_base": {"REMOTE_ADDR": address}}


def test_unknown_tokens_from_one_address_are_refused_past_the_allowance(app, api):
    client = app.test_client()
    allowed = app.config["API_TOKEN_FAILURES_PER_ADDRESS"]
    for n in range(allowed):
        answer = client.get("/api/posts", headers={"Authorization": f"Bearer sol_guess{n}"},
                            **_from(GUESSER))
        assert answer.status_code == 401, n
    held = client.get("/api/posts", headers={"Authorization": "Bearer sol_guess"},
                      **_from(GUESSER))
    assert held.status_code == 429 and "try again in" in held.get_json()["detail"]
    assert 0 < int(held.headers["Retry-After"]) <= 15 * 60
    # the right token from there waits too: the guesser learns nothing meanwhile
    right = {"Authorization": f"Bearer {api.tokens['editor']}"}
    assert client.get("/api/posts", headers=right, **_from(GUESSER)).status_code == 429
    assert client.get("/api/posts", headers=right, **_from(NEIGHBOUR)).status_code == 200
    assert count(app, RateLimitHit) == allowed  # a refused request writes nothing


def test_anonymous_passkey_challenges_are_bounded_per_address(app):
    app.config["SITE_URL"] = "https://soloist.example"
    client = app.test_client()
    csrf = {"X-CSRFToken": csrf_token(client)}  # as the sign-in page's script sends it

    def options(address: str):
        return client.post("/login/passkey/options", headers=csrf, **_from(address))

    allowed = app.config["PASSKEY_CHALLENGES_PER_ADDRESS"]
    for n in range(allowed):
        assert options(GUESSER).status_code == 200, n
    held = options(GUESSER)
    assert held.status_code == 429 and "Retry-After" in held.headers
    assert "try again in" in held.get_json()["error"]
    assert options(NEIGHBOUR).status_code == 200
    with app.app_context():  # one stored challenge per answered request, no more
        assert db.session.scalar(sa.select(sa.func.count()).select_from(
            WebAuthnChallenge)) == allowed + 1
