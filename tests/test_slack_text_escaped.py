"""Slack text escapes &, < and > in everything it quotes, so no one can @channel or link."""

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from webapp.extensions import db
from webapp.models import Post, WebhookDelivery, WebhookEndpoint
from webapp.ops import alerts
from webapp.scheduling import delivery_tick, publish

HOSTILE = "<!channel> <https://evil.example/login|Action needed> & <@U024BE7LH>"
ESCAPED = ("&lt;!channel&gt; &lt;https://evil.example/login|Action needed&gt; &amp; "
           "&lt;@U024BE7LH&gt;")

PAYLOADS = {
    "ops.no_leader": {"key": HOSTILE, "seconds": 30, "term": 4},
    "ops.leader_evicted": {"key": "publish", "holder": HOSTILE, "term": 4, "detail": HOSTILE},
    "ops.post_late": {"title": HOSTILE, "slug": "launch", "late_seconds": 90},
    "ops.timer_paused": {"timer_id": 3, "timer": HOSTILE, "reason": HOSTILE},
    "ops.webhook_failing": {"url": "https://x.example/?a=1&b=<2>", "failures": 3,
                            "last_error": HOSTILE},
    "post.published": {"title": HOSTILE, "slug": "launch"},
    "post.unpublished": {"title": HOSTILE, "slug": "launch"},
    "some.unknown_topic": {"title": HOSTILE},
}


@pytest.mark.parametrize("topic", PAYLOADS)
def test_slack_text_escapes_what_it_quotes(topic):
    line = alerts.text(topic, PAYLOADS[topic])
    assert "<" not in line and ">" not in line
    assert "& " not in line and "&b" not in line  # every & is an entity
    if topic != "ops.webhook_failing":
        assert ESCAPED in line or "&lt;!channel&gt;" in line, line


def test_a_plugin_pause_reason_and_name_are_escaped():
    line = alerts.text("ops.timer_paused", {"plugin": "<@U1>", "reason": "a & b"})
    assert line == "[Soloist] Plugin &lt;@U1&gt; was paused: a &amp; b"


def test_a_hostile_title_reaches_a_slack_endpoint_escaped(app):
    with app.app_context():
        db.session.add(WebhookEndpoint(url="https://hooks.example.com/slack", secret="s" * 32,
                                       events=["post.published"], payload_format="slack"))
        now = datetime.now(UTC)
        db.session.add(Post(title=HOSTILE, slug="launch", body="", status="scheduled",
                            publish_at=now, version=1))
        db.session.commit()
        publish.tick(now)
        delivery_tick.fan_out(now, {"webhooks"})
        body = db.session.scalar(sa.select(WebhookDelivery.body))
    assert json.loads(body) == {"text": f"[Soloist] Published: “{ESCAPED}” (launch)."}
