"""Images over HTTP against a running fleet: an image uploaded through one instance is
served by the other (the bytes live in the database, not on an instance's disk), and an
animation past the decoding budget is refused without the worker's memory."""

import io
import urllib.request

import pytest
from PIL import Image

from tests import media_files
from tests.cluster import peak_rss_mb, post_media

pytestmark = pytest.mark.slow

RSS_GROWTH_MB = 50  # storing the GIF whole would take 8 s and grow the worker 511 MB


def test_an_image_uploaded_on_one_instance_is_served_by_the_other(fleet):
    fleet.wait_settled()  # both instances up
    first, second = fleet.instances
    status, made = post_media(first.url, fleet.token, media_files.jpeg((1200, 800)))
    assert status == 201
    with urllib.request.urlopen(second.url + made["url"], timeout=10) as served:
        assert served.headers["Content-Type"] == "image/jpeg"
        assert "immutable" in served.headers["Cache-Control"]
        assert Image.open(io.BytesIO(served.read())).size == (1200, 800)
    with urllib.request.urlopen(second.url + made["url"].replace("orig", "960"),
                                timeout=10) as served:
        assert Image.open(io.BytesIO(served.read())).size == (960, 640)


def test_a_gif_past_the_budget_is_refused_without_growing_the_workers_memory(fleet):
    fleet.wait_settled()
    instance = fleet.instances[0]
    for i in range(4):  # each worker has decoded an image (Pillow's modules loaded) first
        assert post_media(instance.url, fleet.token, media_files.jpeg((640, 480), (i, 9, 9)))[0] \
            in (200, 201)
    before = {pid: peak_rss_mb(pid, reset=True) for pid in instance.worker_pids()}
    for _ in range(4):  # 20 frames of 2000 × 2000 in 773 bytes: 320 MB decoded
        status, answer = post_media(instance.url, fleet.token, media_files.animated_gif(),
                                    "dance.gif")
        assert status == 422 and answer["field"] == "file", answer
        assert "2000 × 2000 pixels × 20 frames" in answer["detail"]
    grown = {pid: peak_rss_mb(pid) - mb for pid, mb in before.items()}
    assert max(grown.values()) <= RSS_GROWTH_MB, grown
    status, answer = post_media(instance.url, fleet.token, media_files.mpo(), "phone.jpg")
    assert status == 201 and answer["content_type"] == "image/jpeg", answer
