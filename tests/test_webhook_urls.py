"""Webhook URLs: non-ASCII hosts, paths and queries are encoded once, at creation; addresses
that embed or reach private IPv4 space are refused like the private ranges."""

import socket
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.support import make_app
from webapp.extensions import db
from webapp.models import Post, WebhookDelivery, WebhookEndpoint
from webapp.plugins.endpoints import WebhookError, create_webhook
from webapp.scheduling import plugin_tick, publish, workers

SECRET = "s3cret-for-the-receiver-only"
PUBLIC = "93.184.215.14"


@pytest.fixture
def resolver(monkeypatch):
    """Answer every host name with a public address; return the names asked, in order."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if _literal(host):
            return real(host, port, *args, **kwargs)
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def _literal(host: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except (OSError, TypeError):
        return False
    return True


@pytest.fixture
def allowed_app(app, pg_url):
    """An app that may call 127.0.0.1, its context pushed for the test."""
    allowed = make_app(pg_url, WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=2)
    with allowed.app_context():
        yield allowed
    assert workers.drain(10)
    with allowed.app_context():
        db.session.remove()
        db.engine.dispose()


def stored_urls() -> list[str]:
    db.session.rollback()
    return list(db.session.scalars(sa.select(WebhookEndpoint.url)))


def publish_one_post() -> None:
    """Publish a post through the ticks, which hand its event to the webhooks plugin."""
    now = datetime.now(UTC)
    db.session.add(Post(title="Hello", slug="hello", body="", status="scheduled",
                        publish_at=now, created_at=now, updated_at=now))
    db.session.commit()
    publish.tick(now)
    plugin_tick.tick(now, "web.1")


# encoding at creation ------------------------------------------------------------------------

@pytest.mark.parametrize(("typed", "stored"), [
    ("http://93.184.215.14/hooks/café?name=zoë", "http://93.184.215.14/hooks/caf%C3%A9?name=zo%C3%AB"),
    ("http://93.184.215.14/a b/<x>?q=\"1\" 2", "http://93.184.215.14/a%20b/%3Cx%3E?q=%221%22%202"),
    ("http://93.184.215.14/100%?x=5%", "http://93.184.215.14/100%25?x=5%25"),
    ("http://93.184.215.14/a%2Fb;c=1/~d?x=%41&y=[1]&z=a/b?c",
     "http://93.184.215.14/a%2Fb;c=1/~d?x=%41&y=%5B1%5D&z=a/b?c"),
    ("http://93.184.215.14:8080/€#frag", "http://93.184.215.14:8080/%E2%82%AC#frag"),
])
def test_non_ascii_paths_and_queries_are_stored_percent_encoded(app, typed: str, stored: str):
    with app.app_context():
        endpoint = create_webhook(typed, ["post.published"], SECRET)
        assert endpoint.url == stored
        assert stored_urls() == [stored]


@pytest.mark.parametrize(("typed", "stored", "resolved"), [
    ("https://faß.de/hook", "https://xn--fa-hia.de/hook", "xn--fa-hia.de"),
    ("https://βόλος.com/hook", "https://xn--nxasmm1c.com/hook", "xn--nxasmm1c.com"),
    ("https://ශ්‍රී.lk/", "https://xn--10cl1a0b660p.lk/", "xn--10cl1a0b660p.lk"),
    ("https://MÜNCHEN.de:8443/ä", "https://xn--mnchen-3ya.de:8443/%C3%A4", "xn--mnchen-3ya.de"),
    ("https://例え。jp/", "https://xn--r8jz45g.jp/", "xn--r8jz45g.jp"),
    ("https://hooks.example.com/x", "https://hooks.example.com/x", "hooks.example.com"),
])
def test_an_internationalised_host_is_stored_and_resolved_in_its_idna_2008_form(
        app, resolver, typed: str, stored: str, resolved: str):
    with app.app_context():
        assert create_webhook(typed, ["post.published"], SECRET).url == stored
    assert resolver == [resolved]  # faß.de is not fass.de: IDNA 2003 would call another site


@pytest.mark.parametrize(("typed", "message"), [
    ("https://☃.net/hook", "not a valid internationalised domain name"),
    ("https://-bücher.de/", "not a valid internationalised domain name"),
    ("https://bü_cher.de/", "not a valid internationalised domain name"),
])
def test_a_host_that_is_no_valid_internationalised_name_is_refused_naming_the_url(
        app, resolver, typed: str, message: str):
    with app.app_context():
        with pytest.raises(WebhookError) as refused:
            create_webhook(typed, ["post.published"], SECRET)
        assert refused.value.field == "url" and message in refused.value.errors["url"]
        assert stored_urls() == []
    assert resolver == []


def test_a_webhook_with_a_non_ascii_path_is_delivered_to_the_encoded_path(
        allowed_app, receiver):
    create_webhook(f"{receiver.url}/hooks/café?q=ü", ["post.published"], SECRET)
    publish_one_post()
    [request] = wait_for(receiver.received, 10, "the webhook to arrive")
    assert request.path == "/hooks/caf%C3%A9?q=%C3%BC"
    assert workers.drain(10)
    db.session.rollback()
    assert db.session.scalar(sa.select(WebhookDelivery.status)) == "delivered"


def test_an_endpoint_stored_before_urls_were_encoded_is_still_delivered(allowed_app, receiver):
    db.session.add(WebhookEndpoint(url=f"{receiver.url}/ünïcode path", events=["post.published"],
                                   secret=SECRET, active=True, description=""))
    db.session.commit()
    publish_one_post()
    [request] = wait_for(receiver.received, 10, "the webhook to arrive")
    assert request.path == "/%C3%BCn%C3%AFcode%20path"
    assert workers.drain(10)
    db.session.rollback()
    assert db.session.scalar(sa.select(WebhookDelivery.status)) == "delivered"


# addresses that embed or reach private IPv4 space -------------------------------------------

@pytest.mark.parametrize("url", [
    "http://[2002:a00:1::1]/hook",              # 6to4 of 10.0.0.1
    "http://[2002:c0a8:101::1]/hook",           # 6to4 of 192.168.1.1
    "http://[2002:7f00:1::1]/hook",             # 6to4 of 127.0.0.1
    "http://[2002:a9fe:a9fe::1]/latest/",       # 6to4 of 169.254.169.254
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",  # Teredo
    "http://[2001:0:5db8:d70e::1]/",            # Teredo, whatever it embeds
    "http://[64:ff9b::a00:1]/hook",             # NAT64 of 10.0.0.1
    "http://[64:ff9b::7f00:1]/hook",            # NAT64 of 127.0.0.1
    "http://[64:ff9b:1::a00:1]/hook",           # local-use NAT64
    "http://[64:ff9b:1::5db8:d70e]/hook",       # local-use NAT64, whatever it embeds
    "http://192.0.0.1/", "http://192.0.0.9/", "http://192.0.0.10/",  # IETF protocol space
    "http://192.88.99.1/",                      # 6to4 relay anycast
])
def test_special_purpose_addresses_that_reach_private_space_are_refused(app, url: str):
    with app.app_context():
        with pytest.raises(WebhookError) as refused:
            create_webhook(url, ["post.published"], SECRET)
        assert refused.value.field == "url" and "public addresses" in refused.value.errors["url"]
        assert stored_urls() == []


def test_the_private_address_a_6to4_address_embeds_is_named():
    from webapp.plugins.net import UnsafeURL, resolve

    with pytest.raises(UnsafeURL, match=r"a private address \(10\.0\.0\.1 inside 2002:a00:1::1\)"):
        resolve("http://[2002:a00:1::1]/", allow_private=False)


@pytest.mark.parametrize("url", [
    "http://[2002:5db8:d70e::1]/hook",  # 6to4 of a public address
    "http://[64:ff9b::5db8:d70e]/hook",  # NAT64 (DNS64 on IPv6-only hosts) of a public address
])
def test_addresses_that_embed_a_public_ipv4_address_are_accepted(app, url: str):
    with app.app_context():
        assert create_webhook(url, ["post.published"], SECRET).url == url


def test_allow_private_lets_special_purpose_addresses_through(pg_url, app):
    allowed = make_app(pg_url, WEBHOOK_ALLOW_PRIVATE=True)
    with allowed.app_context():
        assert create_webhook("http://[2002:a00:1::1]/", ["post.published"], SECRET)
        db.session.remove()
        db.engine.dispose()
