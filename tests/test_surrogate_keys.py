"""Every public answer names what it shows (Surrogate-Key, Cache-Tag); nothing private does."""

import sqlalchemy as sa

from tests.harness.support import AuthActions, pages, seed_site
from webapp.extensions import db
from webapp.models import MediaFile, Post

NOT_PUBLIC = ("/healthz", "/readyz")
SAME_FOR_EVERYONE = ("/feed.xml", "/sitemap.xml")  # public even to a signed-in viewer


def keys(response) -> list[str]:
    """Return the Surrogate-Key's keys, checking Cache-Tag names the same ones."""
    found = response.headers.get("Surrogate-Key", "").split()
    assert response.headers.get("Cache-Tag", "").split(",") == (found or [""])
    return found


def test_every_public_answer_carries_the_keys_of_what_it_shows(app):
    site = seed_site(app)
    with app.app_context():
        sha, ext = db.session.execute(sa.select(MediaFile.sha256, MediaFile.ext)).one()
        gone = db.session.scalar(sa.select(Post.id).where(Post.status == "unpublished"))
        soon_slug = db.session.get(Post, site["soon"]).slug
    post = f"post-{site['post']}"
    expected = {  # path: (status, keys)
        "/": (200, {"site", "home", post}), "/?page=2": (404, {"site", "home"}),
        "/posts/hello": (200, {"site", post}), "/feed.xml": (200, {"site", "feed", post}),
        "/sitemap.xml": (200, {"site", "sitemap"}),
        f"/posts/{soon_slug}": (404, {"site", f"post-{site['soon']}"}),
        "/posts/gone": (404, {"site", f"post-{gone}"}), "/posts/nope": (404, {"site", "home"}),
        f"/media/{sha}/orig.{ext}": (200, {f"media-{sha[:32]}"}),
    }
    reader = app.test_client()
    for path, (status, named) in expected.items():
        response = reader.get(path)
        assert (response.status_code, set(keys(response))) == (status, named), path
    # the walk covers every public route the app has
    public = {r.rule for r in app.url_map.iter_rules() if r.endpoint.startswith(
        ("site.", "media_files.")) or r.endpoint == "plugins.sitemap_xml"} - set(NOT_PUBLIC)
    assert public == {"/", "/posts/<slug>", "/feed.xml", "/sitemap.xml",
                      "/media/<sha256>/<variant>.<ext>"}
    for path, needs in pages(site):  # the sign-in form, the 404 page, a preview: none
        if needs is None and path not in expected:
            assert keys(reader.get(path)) == [], path


def test_no_private_answer_carries_keys(app):
    site = seed_site(app)
    admin = AuthActions(app.test_client()).client("admin")
    for path, _needs in pages(site) + [(p, None) for p in NOT_PUBLIC]:
        if path not in SAME_FOR_EVERYONE:
            assert keys(admin.get(path)) == [], path
    # a signed-in viewer's public page shows who they are: private, so no keys either
    for path in ("/", "/posts/hello", "/posts/nope"):
        assert keys(admin.get(path)) == [], path


def test_a_304_leaves_the_kept_copys_keys_as_they_are(app):
    seed_site(app)
    reader = app.test_client()
    for path in ("/", "/posts/hello", "/feed.xml"):
        etag = reader.get(path).headers["ETag"]
        response = reader.get(path, headers={"If-None-Match": etag})
        assert response.status_code == 304 and keys(response) == [], path
