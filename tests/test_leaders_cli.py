"""The leader view's commands: `flask leaders` and `flask create-token`."""

import json

from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, base_env, flask_cmd, holding
from tests.harness.support import add_user, record_term


def test_leaders_prints_one_row_per_key_with_holder_term_and_standbys(app, pg_url):
    with holding(pg_url, "soloist:web.1:11", PUBLISH_KEY) as conn, \
            holding(pg_url, "soloist:web.2:22"):
        record_term(app, PUBLISH_KEY, conn, term=6, heartbeat_age=2)
        result = app.test_cli_runner().invoke(args=["leaders"])
    assert result.exit_code == 0, result.output
    header, publish, plugins, footer = result.output.strip().splitlines()
    assert header.split()[:4] == ["KEY", "HEX", "DECIMAL", "HOLDER"]
    assert publish.split()[:5] == ["publish", "0x9a37b7a1", str(PUBLISH_KEY),
                                   "soloist:web.1:11", "6"]
    assert publish.split()[-1] == "1"  # one standby
    assert plugins.split()[:4] == ["plugins", "0x7b9c5f3e", str(PLUGINS_KEY), "(nobody)"]
    assert "2 lock session(s) connected" in footer


def test_leaders_json_has_the_api_shape(app, pg_url):
    with holding(pg_url, "soloist:web.1:11", PLUGINS_KEY):
        result = app.test_cli_runner().invoke(args=["leaders", "--json"])
    leaders = {k["name"]: k for k in json.loads(result.output)}
    assert leaders["plugins"]["holder"]["application_name"] == "soloist:web.1:11"
    assert leaders["plugins"]["key_hex"] == "0x7b9c5f3e"
    assert leaders["publish"]["holder"] is None
    assert [s["instance"] for s in leaders["publish"]["standbys"]] == ["web.1"]


def test_create_token_prints_a_working_token_on_its_last_line(app, pg_url):
    add_user(app, "ops@example.com", "viewer")
    # a real `flask` process, as ops would run it
    result = flask_cmd(base_env(pg_url), "create-token", "OPS@example.com", "--label", "ci")
    token = result.stdout.strip().splitlines()[-1]
    assert token.startswith("sol_") and len(token) > 40
    response = app.test_client().get("/api/leaders", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert token not in result.stderr


def test_create_token_for_an_unknown_or_inactive_user_fails_cleanly(app):
    add_user(app, "gone@example.com", "admin", active=False)
    runner = app.test_cli_runner()
    unknown = runner.invoke(args=["create-token", "nobody@example.com"])
    assert unknown.exit_code != 0 and "no user has the email" in unknown.output
    inactive = runner.invoke(args=["create-token", "gone@example.com"])
    assert inactive.exit_code != 0 and "deactivated" in inactive.output


def test_revoke_tokens_stops_them_working(app):
    add_user(app, "ops@example.com", "viewer")
    runner = app.test_cli_runner()
    token = runner.invoke(args=["create-token", "ops@example.com"]).output.strip().splitlines()[-1]
    assert "Revoked 1 API token(s)" in runner.invoke(args=["revoke-tokens",
                                                            "ops@example.com"]).output
    response = app.test_client().get("/api/leaders", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401
