"""The icon: named in every page's head, and /favicon.ico answers for those that do not look."""

import re

from tests.harness.support import text


def test_favicon_ico_is_an_icon_anyone_may_fetch_and_cache(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response.mimetype == "image/vnd.microsoft.icon"
    assert response.data[:4] == b"\x00\x00\x01\x00"  # an ICO header
    assert "public" in response.headers["Cache-Control"]
    assert "Set-Cookie" not in response.headers
    again = client.get("/favicon.ico", headers={"If-None-Match": response.headers["ETag"]})
    assert again.status_code == 304


def test_pages_signed_in_or_not_name_an_icon_that_is_served(client, auth):
    for page in (text(client.get("/login")), text(auth.client("viewer").get("/admin/"))):
        href = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', page)[1]
        with client.get(href) as icon:
            assert icon.status_code == 200 and icon.mimetype == "image/svg+xml"
