"""The post editor's forms as a test fills them: a post made as the forms make it, the
hidden fields of its page, the text typed."""

from tests.harness.support import text
from webapp.posts import create_post


def opened(client, post_id: int) -> dict:
    """Return the edit form's hidden version and digest as the page has them now."""
    page = text(client.get(f"/admin/posts/{post_id}"))
    return {name: page.split(f'name="{name}" value="')[1].split('"')[0]
            for name in ("version", "digest")}


def created(app, body: str) -> int:
    """Create a post as the editors' forms do (its first revision kept); return its id."""
    with app.app_context():
        return create_post("Hello", "hello", body).id


def typed(body: str, title: str = "Hello", **more) -> dict:
    return {"title": title, "slug": "hello", "body": body, **more}
