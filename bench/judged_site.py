"""The site bench/judges.py puts before the judges: one instance on SQLite, seeded through
the JSON API as an editor would, each page saved as a reader gets it."""

import io
import json
import re
import secrets
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageOps

from tests.harness.cluster import Instance, base_env, flask_cmd, wait_for
from tests.harness.support import cli_user, make_app

EDITOR = "judged@example.com"
BODY_WITH_IMAGE = """The boats came in at dawn, as they do on the first calm morning after \
a blow, and the quay filled before the light did.

{image}

By seven the fish market had sold out. The harbour master counted forty-one boats, the \
most since the spring, and said the season would be long.

## What the tide brought

Crates of mackerel, two lost buoys and a rowing boat nobody has claimed yet.

{second}"""
BODY_OF_TEXT = """A harbour works to the tide's timetable, not the clock's; this is how \
ours runs through a week in March.

## Arrivals

1. The first boats at high water, before dawn.
2. The ferry at nine, whatever the tide.
3. The dredger on Thursdays.

> The sea keeps no appointments, but it keeps its hours. — the harbour master

### The ledger

Each landing is written in the ledger with its weight: `41 boats, 3.2 t`. See the \
[harbour's notices](/posts/notices) or the [port authority](https://example.com/port).

- Mooring fees are due on the first.
  1. By card at the office.
  2. ~~By cheque~~ no longer.
- The slipway is closed at low water.

| day | high water | boats |
|:----|-----------:|:-----:|
| Monday | 06:12 | 38 |
| Tuesday | 06:58 | 41 |

```python
landed = sum(boat.catch for boat in harbour.boats)
```

---

Questions to the office, <harbour@example.com>, or by post.\\
The office is open from nine."""


def photo(size: tuple[int, int] = (2000, 1333)) -> bytes:
    """Return a camera's JPEG in size and weight: a sky-to-sea gradient under fine grain."""
    sky = Image.linear_gradient("L").resize(size)
    grain = Image.blend(sky, Image.effect_noise(size, 48), 0.2)
    buffer = io.BytesIO()
    Image.merge("RGB", (sky, grain, ImageOps.invert(sky))).save(buffer, "JPEG", quality=85)
    return buffer.getvalue()


def slug(label: str) -> str:
    """Return a file name's stem for a page's label."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


class Site:
    """A running instance on a throwaway SQLite database under scratch."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.database = f"sqlite:///{scratch / 'soloist.db'}"
        self.instance = Instance("judged", self.database, workers=2, log_dir=scratch)
        self.instance.env["SITE_URL"] = self.instance.url  # canonical links on this address
        self.url = self.instance.url
        self.token = ""

    def __enter__(self) -> "Site":
        flask_cmd(base_env(self.database), "db", "upgrade")
        self.token = cli_user(self.database, EDITOR, role="editor") or ""
        self.instance.start()
        wait_for(lambda: self._status("/readyz") == 200, 60, "the instance to be ready")
        return self

    def __exit__(self, *_exc: object) -> None:
        self.instance.stop()

    def _status(self, path: str) -> int | None:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as answer:
                return answer.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return None

    def api(self, method: str, path: str, data: bytes, content_type: str) -> dict:
        """Call the JSON API as the editor; return its answer."""
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": content_type})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)

    def post(self, title: str, body: str, slug: str) -> int:
        """Write a draft; return its id."""
        return self.api("POST", "/api/posts", json.dumps(
            {"title": title, "body": body, "slug": slug}).encode(), "application/json")["id"]

    def publish(self, title: str, body: str, slug: str) -> str:
        """Publish a post now; return its path."""
        post_id = self.post(title, body, slug)
        self.api("POST", f"/api/posts/{post_id}/publish", b"{}", "application/json")
        return f"/posts/{slug}"

    def upload(self, data: bytes, alt: str) -> dict:
        """Upload an image as an editor does; return the API's answer."""
        boundary = secrets.token_hex(16)
        parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="alt"\r\n\r\n{alt}\r\n',
                 f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                 'filename="harbour.jpg"\r\nContent-Type: image/jpeg\r\n\r\n']
        body = "".join(parts).encode() + data + f"\r\n--{boundary}--\r\n".encode()
        return self.api("POST", "/api/media", body, f"multipart/form-data; boundary={boundary}")

    def seed(self, posts: int) -> dict[str, str]:
        """Publish posts (the two judged ones last, newest); return the judged pages' paths."""
        for i in range(posts - 2):
            self.publish(f"Harbour notice {i + 1}", f"Notice {i + 1}: the slipway is open "
                         "from six until the tide turns.", f"notice-{i + 1}")
        text = self.publish("A week of tides", BODY_OF_TEXT, "a-week-of-tides")
        image = self.upload(photo(), "Fishing boats moored along the quay at dawn")["markdown"]
        second = self.upload(photo((1200, 800)), "The rowing boat nobody has claimed")
        # alone in its paragraph with a title: a captioned figure, lazily loaded
        caption = second["markdown"].replace(")", ' "Unclaimed, since Tuesday")')
        body = BODY_WITH_IMAGE.format(image=image, second=caption)
        with_image = self.publish("The boats came in at dawn", body, "dawn")
        draft = self.post("Tomorrow's tides", body, "tomorrow")
        return {"home, no site description": "/", "home, page 2": "/?page=2",
                "post with an image": with_image, "post without an image": text,
                "404 page": "/posts/no-such-post", "sign-in page": "/login",
                "preview link to a draft": self.preview(draft)}

    def get(self, path: str) -> tuple[int, str, bytes]:
        """Return (status, media type, body) of a reader's GET."""
        try:
            answer = urllib.request.urlopen(self.url + path, timeout=30)
        except urllib.error.HTTPError as exc:
            answer = exc
        with answer:
            return answer.status, answer.headers.get_content_type(), answer.read()

    def save(self, label: str, path: str) -> Path:
        """Save the page at path as a reader gets it; return the file."""
        status, kind, body = self.get(path)
        expected = 404 if label.startswith("404") else 200
        assert status == expected, f"{path} answered {status}, not {expected}"
        suffix = ".css" if kind == "text/css" else ".html"
        saved = self.scratch / (slug(label) + suffix)
        saved.write_bytes(body)
        return saved

    def as_shell(self, change: Callable[[], object]) -> object:
        """Return change() run in this process on the site's database, audited as a command."""
        from webapp.extensions import db
        from webapp.ops import audit

        app = make_app(self.database)
        with app.app_context():
            audit.from_shell()
            try:
                return change()
            finally:
                db.session.remove()
                db.engine.dispose()

    def describe(self, description: str) -> None:
        """Set the site's description, as Site settings does (the pages validate against
        the settings' version: the next read is the new page)."""
        from webapp.site.state import save_settings

        self.as_shell(lambda: save_settings("", description))

    def preview(self, post_id: int) -> str:
        """Return the path of a week's preview link to a draft, as an editor makes it."""
        from webapp import posts

        _link, token = self.as_shell(lambda: posts.create_link(post_id, 7, None))
        return f"/preview/{token}"

    def check_not_html(self) -> list[list[str]]:
        """Return a row for each answer that is not HTML: what it is and whether it parses."""
        rows = []
        for path, media_type in (("/feed.xml", "application/atom+xml"),
                                 ("/sitemap.xml", "application/xml"),
                                 ("/robots.txt", "text/plain")):
            status, kind, body = self.get(path)
            if media_type == "text/plain":
                fine = b"Sitemap: " + self.url.encode() + b"/sitemap.xml" in body
                what = "text/plain, names the sitemap on SITE_URL"
            else:
                fine = ET.fromstring(body) is not None
                what = f"{media_type}, well-formed XML"
            ok = status == 200 and kind == media_type and fine
            rows.append([f"`{path}`", f"{what} (got {status}, {kind})",
                         "yes" if ok else "**no**"])
        return rows
