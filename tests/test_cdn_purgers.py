"""The CDN purgers send what Fastly's and Cloudflare's APIs document (checked by a local
stand-in that answers as they do), batch as far as each allows, and say clearly why a
purge failed without ever showing the token."""

import json

import pytest

from tests.harness.cache_apis import TOKEN
from webapp.site import purgers


def test_fastly_purges_by_surrogate_key_soft_unless_hard(cache_api):
    fastly = purgers.Fastly("fastly://SvcId42", TOKEN, cache_api.url)
    fastly.purge(["post-1", "home"], hard=False)
    fastly.purge(["post-2"], hard=True)
    soft, hard = cache_api.requests
    assert (soft.method, soft.path) == ("POST", "/service/SvcId42/purge")
    assert soft.headers["Surrogate-Key"] == "post-1 home"
    assert soft.headers["Fastly-Soft-Purge"] == "1"
    assert "Fastly-Soft-Purge" not in hard.headers


def test_fastly_takes_256_keys_a_request(cache_api):
    purgers.Fastly("fastly://S", TOKEN, cache_api.url).purge(
        [f"post-{i}" for i in range(300)], True)
    assert [len(r.headers["Surrogate-Key"].split()) for r in cache_api.requests] == [256, 44]


def test_cloudflare_purges_by_tag_30_a_request_with_a_bearer_token(cache_api):
    purgers.Cloudflare("cloudflare://zone9", TOKEN, cache_api.url).purge(
        [f"post-{i}" for i in range(31)], hard=False)
    first, second = cache_api.requests
    assert (first.method, first.path) == ("POST", "/zones/zone9/purge_cache")
    assert json.loads(first.body)["tags"][:2] == ["post-0", "post-1"]
    assert [len(json.loads(r.body)["tags"]) for r in cache_api.requests] == [30, 1]


@pytest.mark.parametrize("kind", [purgers.Fastly, purgers.Cloudflare])
def test_a_refused_purge_says_why_and_never_shows_the_token(cache_api, kind):
    with pytest.raises(purgers.PurgeFailed) as refused:
        kind("x://svc", "wrong-" + TOKEN, cache_api.url).purge(["home"], hard=True)
    assert "HTTP 40" in str(refused.value) and TOKEN not in str(refused.value)


def test_a_rate_limit_carries_the_wait_the_api_asks_for(cache_api):
    cache_api.limited, cache_api.retry_after = 1, 30
    with pytest.raises(purgers.PurgeFailed) as limited:
        purgers.Fastly("fastly://S", TOKEN, cache_api.url).purge(["home"], hard=True)
    assert limited.value.retry_after == 30 and "HTTP 429" in str(limited.value)


def test_a_missing_token_is_named(cache_api):
    with pytest.raises(purgers.PurgeFailed, match="CLOUDFLARE_API_TOKEN is not set"):
        purgers.Cloudflare("cloudflare://z", "", cache_api.url).purge(["home"], hard=True)


def test_a_plain_purge_sends_purge_for_each_path(cache_api):
    purgers.PlainPurge("purge+" + cache_api.url).purge(["/posts/a", "/"], hard=True)
    assert [(r.method, r.path) for r in cache_api.requests] == [
        ("PURGE", "/posts/a"), ("PURGE", "/")]


def test_a_purgers_name_leaves_its_credentials_out():
    assert purgers.name("purge+https://user:pw@cache.example:8443/x?y=1") == (
        "purge+https://cache.example:8443/x")
