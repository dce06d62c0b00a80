"""An image uploaded through one instance of a fleet is served by the other: the bytes live
in the database, not on an instance's disk."""

import io
import json
import urllib.request
import uuid

import pytest
from PIL import Image

from tests import media_files

pytestmark = pytest.mark.slow


def test_an_image_uploaded_on_one_instance_is_served_by_the_other(fleet):
    fleet.wait_settled()  # both instances up
    first, second = fleet.instances
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"alt\"\r\n\r\nA gull\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"gull.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n").encode() + (
        media_files.jpeg((1200, 800))) + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(first.url + "/api/media", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {fleet.token}",
                                              "Content-Type": "multipart/form-data; "
                                                              f"boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=15) as response:
        assert response.status == 201
        made = json.load(response)
    with urllib.request.urlopen(second.url + made["url"], timeout=10) as served:
        assert served.headers["Content-Type"] == "image/jpeg"
        assert "immutable" in served.headers["Cache-Control"]
        assert Image.open(io.BytesIO(served.read())).size == (1200, 800)
    with urllib.request.urlopen(second.url + made["url"].replace("orig", "960"),
                                timeout=10) as served:
        assert Image.open(io.BytesIO(served.read())).size == (960, 640)
