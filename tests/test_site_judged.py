"""What the outside judges check on the public pages: valid HTML, search engines' needs,
feed readers' links, the largest paint, structured data and compression."""

import re
from datetime import UTC, datetime, timedelta

from tests.support import new_post, text

# stored times carry microseconds, which HTML's date strings cannot hold
T0 = datetime(2026, 3, 29, 9, 0, 5, 123456, tzinfo=UTC)


def test_no_time_on_a_public_page_carries_a_fraction_of_a_second(app):
    for i in range(21):
        new_post(app, f"Post {i}", slug=f"post-{i}", status="published",
                 published_at=T0 + timedelta(minutes=i, microseconds=i))
    client = app.test_client()
    pages = [text(client.get(url)) for url in ("/", "/?page=2", "/posts/post-3")]
    stamps = [s for page in pages for s in re.findall(r'<time datetime="([^"]*)"', page)]
    assert len(stamps) == 22 and "2026-03-29T09:03:05Z" in stamps
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s) for s in stamps), stamps
