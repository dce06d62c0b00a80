"""A chunked request body (no Content-Length) over the upload limit is refused with 413; an
upload from someone who may not make it is refused before its body is read.

Against a real gunicorn: it de-chunks the body itself and tells the app so
(wsgi.input_terminated), so nothing before the app sees how long the body will be.
"""

import http.client
import io
import json
import socket
import urllib.request

import pytest
from werkzeug.datastructures import FileStorage
from werkzeug.test import encode_multipart

from tests.harness import media_files
from tests.harness.cluster import (
    Instance,
    drop_database,
    migrated_database,
    status_of,
    wait_for,
)
from tests.harness.support import cli_user, count, csrf_token, postgres_or_skip
from webapp.accounts.security import UPLOAD_LIMIT
from webapp.models import MediaFile

ADMIN = "admin@example.com"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Return (instance, token, database URL): one gunicorn worker on a database of its own."""
    postgres_or_skip()
    url = migrated_database("soloist_chunked")
    instance = None
    try:
        env = {"SCHEDULER_ENABLED": "false"}
        probe = Instance("chunked", url, workers=1, log_dir=tmp_path_factory.mktemp("c"), **env)
        token = cli_user(url, ADMIN)
        instance = probe.start()
        wait_for(lambda: status_of(instance.url + "/healthz", 2) == 200, 30,
                 "gunicorn answering /healthz")
        yield instance, token, url
    finally:
        if instance is not None:
            instance.stop()
        drop_database(url)


def send_chunked(instance: Instance, path: str, body: bytes, headers: dict,
                 chunk: int = 64 * 1024) -> tuple[int, bytes]:
    """POST body with Transfer-Encoding: chunked; return the status and the answer."""
    conn = http.client.HTTPConnection("127.0.0.1", instance.port, timeout=30)
    try:
        conn.putrequest("POST", path)
        for name, value in {**headers, "Transfer-Encoding": "chunked"}.items():
            conn.putheader(name, value)
        conn.endheaders()
        try:
            for start in range(0, len(body), chunk):
                piece = body[start:start + chunk]
                conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before reading it all: read its answer
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def api_posts(instance: Instance, token: str) -> list[dict]:
    """Return the posts the API lists."""
    request = urllib.request.Request(instance.url + "/api/posts",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["posts"]


def test_a_chunked_json_body_over_the_limit_is_refused_and_creates_nothing(server):
    instance, token, _ = server
    body = json.dumps({"title": "Too big", "body": "a" * (UPLOAD_LIMIT + 100_000)}).encode()
    status, answer = send_chunked(instance, "/api/posts", body, {
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert status == 413, answer[:300]
    assert json.loads(answer)["error"]
    assert api_posts(instance, token) == []


def test_a_chunked_form_over_the_limit_is_refused(server):
    instance, _, _ = server
    body = b"email=a%40b.c&password=" + b"x" * (UPLOAD_LIMIT + 100_000)
    status, answer = send_chunked(instance, "/login", body, {
        "Content-Type": "application/x-www-form-urlencoded"})
    assert status == 413, answer[:300]
    assert b"too large" in answer


def test_a_chunked_body_under_the_limit_is_read_whole(server):
    instance, token, _ = server
    text = "b" * (UPLOAD_LIMIT // 2)
    body = json.dumps({"title": "Chunked", "body": text[:150_000]}).encode()
    status, answer = send_chunked(instance, "/api/posts", body, {
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert status == 201, answer[:300]
    assert [p["title"] for p in api_posts(instance, token)] == ["Chunked"]


def answer_before_the_body(instance: Instance, path: str, headers: dict) -> int | None:
    """Declare a 10 MB multipart body and send only its first kilobyte; return the status
    the server answers with meanwhile, or None when it waits for the rest (5 s)."""
    head = "".join(f"{name}: {value}\r\n" for name, value in {
        "Host": "localhost", "Content-Length": "10000000",
        "Content-Type": "multipart/form-data; boundary=soloist", **headers}.items())
    with socket.create_connection(("127.0.0.1", instance.port), timeout=5) as conn:
        conn.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode() + b"--soloist\r\n"
                     + b"x" * 1024)
        try:
            first = conn.recv(64)
        except TimeoutError:
            return None
    return int(first.split()[1])


@pytest.mark.parametrize("who, status", [(None, 401), ("sol_wrong", 401), ("viewer", 403)])
def test_an_api_upload_its_token_cannot_make_is_refused_before_its_body_is_read(
        server, who, status):
    instance, _, url = server
    token = cli_user(url, f"viewer-{status}@example.com", "viewer") if who == "viewer" else who
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    assert answer_before_the_body(instance, "/api/media", headers) == status


def test_a_strangers_upload_on_the_media_page_is_sent_to_sign_in_unread(server):
    instance, _, _ = server
    assert answer_before_the_body(instance, "/admin/media/", {}) == 302


def test_an_editors_upload_larger_than_a_form_goes_through_the_media_page(app, auth):
    """The CSRF and NUL checks read the form: they now do it with the upload's own limit,
    so a 3 MB photo (under MEDIA_MAX_BYTES, over the 2 MB of other forms) is stored."""
    editor = auth.client("editor")
    photo = media_files.jpeg((1000, 700)) + b"\0" * 3_000_000  # what follows the image
    # encoded here, in memory: the test client would spool it to a file it never closes
    boundary, body = encode_multipart({"file": FileStorage(io.BytesIO(photo), "big.jpg"),
                                       "alt": "A big one", "csrf_token": csrf_token(editor)})
    answer = editor.post("/admin/media/", data=body,
                         content_type=f"multipart/form-data; boundary={boundary}")
    assert answer.status_code == 303, answer.status_code
    assert count(app, MediaFile) == 1
