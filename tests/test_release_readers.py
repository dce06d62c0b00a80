"""Readers never see half a launch: five pages polled every 50 ms over real HTTP, while a
release goes live, show the site before it or the site after it, never a mix."""

import threading
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

from tests.harness.cluster import wait_for
from tests.harness.support import new_post, serve
from webapp import posts
from webapp.posts.releases import ItemSpec
from webapp.scheduling import publish

AT = datetime(2031, 6, 1, 9, 0, tzinfo=UTC)
NEW = 3  # posts the release publishes


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def state_of(path: str, status: int, page: str) -> str:
    """Return "before", "after" or "mixed" for one answer (what a reader saw)."""
    if path in ("/", "/feed.xml"):
        new = sum(f"Launch post {n}" in page for n in range(NEW))
        old = "Old offer" in page
        changed = "Prices (new)" in page
        if new == 0 and old and not changed:
            return "before"
        if new == NEW and not old and changed:
            return "after"
        return "mixed"
    if path == "/posts/prices":
        return "before" if "40 euros" in page else "after" if "30 euros" in page else "mixed"
    return {404: "before", 200: "after"}.get(status, "mixed")


def test_readers_polling_five_pages_every_50_ms_never_see_a_mix(app):
    earlier = AT - timedelta(days=2)
    new = [new_post(app, f"Launch post {n}", slug=f"launch-{n}") for n in range(NEW)]
    old = new_post(app, "Old offer", status="published", published_at=earlier)
    live = new_post(app, "Prices", status="published", body="40 euros", published_at=earlier)
    with app.app_context():
        posts.releases.create_release("Launch", AT, [
            *(ItemSpec("publish", i) for i in new), ItemSpec("unpublish", old),
            ItemSpec("change", live, title="Prices (new)", body="30 euros")])
    paths = ["/", "/feed.xml", "/posts/prices", "/posts/launch-0", "/posts/launch-2"]
    seen: list[tuple[int, str, str]] = []  # (round, path, state)
    stop, rounds = threading.Event(), [0]
    with serve(app) as base:
        def poll() -> None:
            while not stop.is_set():
                for path in paths:
                    seen.append((rounds[0], path, state_of(path, *fetch(base + path))))
                rounds[0] += 1
                stop.wait(0.05)

        reader = threading.Thread(target=poll)
        reader.start()
        try:
            wait_for(lambda: rounds[0] >= 3, 30, "three rounds before the release")
            went = rounds[0]
            with app.app_context():
                publish.tick(AT)
            wait_for(lambda: rounds[0] >= went + 4, 30, "rounds after the release")
        finally:
            stop.set()
            reader.join(30)
    states = [state for _round, _path, state in seen]
    assert "mixed" not in states, [s for s in seen if s[2] == "mixed"]
    first_after = states.index("after")
    # once one page showed the release, every answer after it did: no way back
    assert set(states[:first_after]) == {"before"} and set(states[first_after:]) == {"after"}
    assert states.count("before") >= 15 and states.count("after") >= 15
