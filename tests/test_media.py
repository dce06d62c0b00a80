"""Images in posts: uploads and each refusal, storage once by content, serving, deletion, API.

Every file is made in the test that sends it (tests/harness/media_files.py).
"""

import io
import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from PIL import Image

from tests.harness import media_files as made
from tests.harness.support import AuthActions, count, csrf_token, new_post, text
from webapp.extensions import db
from webapp.models import AuditEvent, MediaFile, MediaVariant, ScheduledChange
from webapp.site.markdown import SIZES

JSON = {"Accept": "application/json"}


def upload(client, data: bytes, alt: str = "A red square", name: str = "photo.jpg",
           as_json: bool = True):
    """Send the upload form as the editor's script (JSON) or the Media page (HTML) does."""
    form = {"file": (io.BytesIO(data), name), "alt": alt, "csrf_token": csrf_token(client)}
    return client.post("/admin/media/", data=form, content_type="multipart/form-data",
                       headers=JSON if as_json else {})


def audit_actions(app) -> list[str]:
    with app.app_context():
        return list(db.session.scalars(sa.select(AuditEvent.action).order_by(AuditEvent.id)))


def test_an_upload_answers_the_markdown_with_its_alt_text_and_lists_the_file(app, editor):
    answer = upload(editor, made.jpeg((2000, 1500)), alt="Harbour [at] *dawn*")
    assert answer.status_code == 201, text(answer)
    body = answer.get_json()
    assert body["markdown"] == (r"![Harbour \[at\] \*dawn\*]"
                                f"(/media/{body['sha256']}/orig.jpg)")
    assert body["content_type"] == "image/jpeg" and body["widths"] == [480, 640, 960, 1600]
    page = text(editor.get("/admin/media/"))
    assert "photo.jpg" in page and "Harbour [at] *dawn*" in page and "editor@example.com" in page
    assert f"/media/{body['sha256']}/480.jpg" in page  # the thumbnail
    assert "No post" in page
    assert audit_actions(app)[-1] == "media.upload"


def test_the_inserted_markdown_keeps_punctuation_as_typed_and_renders_the_alt_exactly(
        app, editor):
    """No stray "\\," (issue 37, finding 8); markup in the alt text stays text."""
    from webapp.site.markdown import render

    alt = "Gulls, at dawn. (Brighton) 3 o'clock: \"quiet\" & <b>x</b> ![a](b) *c* #1"
    body = upload(editor, made.jpeg((800, 600)), alt=alt).get_json()
    written = body["markdown"].split("](/media/")[0]
    assert written == ("![Gulls, at dawn. (Brighton) 3 o'clock: \"quiet\" \\& \\<b\\>x\\</b\\> "
                       "\\!\\[a\\](b) \\*c\\* #1")
    with app.test_request_context():
        html = str(render(body["markdown"]))
    assert "<b>" not in html and html.count("<img") == 1
    assert ('alt="Gulls, at dawn. (Brighton) 3 o\'clock: &quot;quiet&quot; &amp; '
            '&lt;b&gt;x&lt;/b&gt; ![a](b) *c* #1"') in html


def test_the_media_page_form_uploads_and_keeps_the_alt_text_when_refused(app, editor):
    refused = upload(editor, b"just text", alt="My caption", as_json=False)
    assert refused.status_code == 422
    page = text(refused)
    assert 'value="My caption"' in page and "not an image Soloist takes" in page
    assert 'id="e-file"' in page
    done = upload(editor, made.image("PNG"), name="chart.png", as_json=False)
    assert done.status_code == 303
    assert "chart.png" in text(editor.get("/admin/media/"))


def test_the_same_file_uploaded_twice_is_stored_once(app, editor):
    data = made.jpeg()
    first, second = upload(editor, data), upload(editor, data, alt="Again", name="copy.jpg")
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.get_json()["sha256"] == second.get_json()["sha256"]
    assert second.get_json()["markdown"].startswith("![Again](")  # the alt typed this time
    assert count(app, MediaFile) == 1
    assert audit_actions(app).count("media.upload") == 1


@pytest.mark.parametrize(("data", "says"), [
    (made.svg(), "SVG images are refused"),
    (made.png_with_html(), "HTML or script besides an image"),
    (made.png_with_zip(), "also a ZIP archive"),
    (made.image("PNG") + b"\x00trailing bytes", "data after its end"),
    (made.gif_that_is_javascript(), "also JavaScript"),
    (made.truncated_jpeg(), "damaged or cut short"),
    (made.png_bomb(), "decompression bomb"),
    (b"%PDF-1.4 not a picture", "not an image Soloist takes"),
], ids=["svg", "png+html", "png+zip", "png+trailing", "gif+js", "truncated-jpeg", "bomb",
        "pdf"])
def test_unsafe_files_are_refused_naming_the_problem_and_nothing_is_stored(app, editor, data,
                                                                            says):
    answer = upload(editor, data, name="innocent.jpg")
    assert answer.status_code == 422
    assert answer.get_json()["field"] == "file" and says in answer.get_json()["detail"]
    assert count(app, MediaFile) == 0 and count(app, MediaVariant) == 0


def test_an_animation_past_the_decoding_budget_is_refused_naming_the_limit(app, api):
    # 300 bytes that decode to 2000 × 2000 pixels × 20 frames (320 MB of RGBA): before, 8 s
    # and half a gigabyte of the worker, then a 500
    answer = multipart(api, made.animated_gif())
    assert answer.status_code == 422, answer.get_json()
    assert answer.get_json()["field"] == "file"
    says = answer.get_json()["detail"]
    assert "2000 × 2000 pixels × 20 frames" in says and "at most 200 MB" in says, says
    assert count(app, MediaFile) == 0 and count(app, MediaVariant) == 0
    small = made.animated_gif((300, 200), frames=12)  # 2.9 MB decoded: the setting decides
    app.config["MEDIA_MAX_DECODED_MB"] = 2
    assert "at most 2 MB" in multipart(api, small).get_json()["detail"]
    app.config["MEDIA_MAX_DECODED_MB"] = 3
    assert multipart(api, small).status_code == 201


def test_the_media_page_refuses_an_animation_past_the_budget_keeping_the_alt_text(app, editor):
    page = upload(editor, made.animated_gif(), alt="Dancing", as_json=False)
    assert page.status_code == 422 and 'value="Dancing"' in text(page)
    assert "at most 200 MB" in text(page) and 'id="e-file"' in text(page)
    assert count(app, MediaFile) == 0


def test_frames_that_reach_past_a_gifs_canvas_count_at_the_size_they_decode_to(app, api):
    app.config["MEDIA_MAX_DECODED_MB"] = 1  # the header says 1 × 1; the frames are larger
    assert multipart(api, made.animated_gif((1, 1), 2, frame=(10, 10))).status_code == 201
    answer = multipart(api, made.animated_gif((1, 1), 2, frame=(1000, 1000)))
    assert answer.status_code == 422 and "1000 × 1000 pixels × 2 frames" in \
        answer.get_json()["detail"]


def test_an_animation_within_the_budget_is_kept_whole(app, client, editor):
    body = upload(editor, made.animated_gif((300, 200), frames=12), name="wave.gif").get_json()
    assert body["content_type"] == "image/gif" and body["widths"] == []
    served = Image.open(io.BytesIO(client.get(body["url"]).data))
    assert served.size == (300, 200) and served.n_frames == 12


def test_a_phones_multi_picture_jpeg_is_stored_as_its_first_picture(app, client, api):
    answer = multipart(api, made.mpo())  # Pillow opens it as MPO, not JPEG
    assert answer.status_code == 201, answer.get_json()
    body = answer.get_json()
    assert body["content_type"] == "image/jpeg" and body["widths"] == [480, 640, 960]
    stored = Image.open(io.BytesIO(client.get(body["url"]).data))
    assert (stored.format, getattr(stored, "n_frames", 1), stored.size) == ("JPEG", 1,
                                                                           (1200, 900))
    red, _green, blue = stored.getpixel((600, 450))
    assert red > 150 and blue < 100  # the first picture, not the second
    assert client.get(f"/media/{body['sha256']}/960.webp").content_type == "image/webp"


def test_the_alt_text_is_required(app, editor):
    answer = upload(editor, made.jpeg(), alt="   ")
    assert answer.status_code == 422 and answer.get_json()["field"] == "alt"
    assert count(app, MediaFile) == 0


def test_a_file_over_the_limit_is_refused_with_413_naming_the_limit(app, editor):
    app.config["MEDIA_MAX_BYTES"] = 100_000
    just_over = upload(editor, made.jpeg() + b"\x00" * 100_000)  # within the form's slack
    far_over = upload(editor, b"\xff" * 400_000)  # refused before the body is read
    for answer in (just_over, far_over):
        assert answer.status_code == 413, text(answer)
        assert "at most 100 kB" in answer.get_json()["detail"]
        assert answer.get_json()["field"] == "file"
    page = upload(editor, b"\xff" * 400_000, as_json=False)
    assert page.status_code == 413 and "at most 100 kB" in text(page)
    assert count(app, MediaFile) == 0
    # other forms keep MAX_CONTENT_LENGTH (2 MB): the larger limit is the upload's alone
    big = editor.post("/admin/posts/preview", data={"body": "x" * 3_000_000,
                                                     "csrf_token": csrf_token(editor)})
    assert big.status_code == 413


def test_exif_gps_is_stripped_and_the_orientation_applied(app, editor):
    answer = upload(editor, made.jpeg_with_gps_rotated())
    body = answer.get_json()
    assert (body["width"], body["height"]) == (100, 300)  # turned upright
    served = editor.get(body["url"])
    picture = Image.open(io.BytesIO(served.data))
    assert picture.size == (100, 300)
    assert picture.getpixel((50, 5)) == (255, 255, 255)  # the white edge is now the top
    assert dict(picture.getexif()) == {} and b"Exif" not in served.data


def test_a_file_is_served_immutable_by_content_address_and_revalidates_without_a_read(
        app, client, editor):
    body = upload(editor, made.image("WEBP", (1000, 500)), name="pic.webp").get_json()
    served = client.get(body["url"])
    assert served.status_code == 200 and served.content_type == "image/webp"
    assert served.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert served.headers["X-Content-Type-Options"] == "nosniff"
    assert "Set-Cookie" not in served.headers
    tag = served.headers["ETag"]
    assert Image.open(io.BytesIO(served.data)).size == (1000, 500)
    small = client.get(f"/media/{body['sha256']}/480.webp")
    assert Image.open(io.BytesIO(small.data)).size == (480, 240)
    assert client.get(f"/media/{body['sha256']}/960.webp").status_code == 200
    assert client.get(f"/media/{body['sha256']}/1600.webp").status_code == 404  # not made
    assert client.get(f"/media/{body['sha256']}/orig.png").status_code == 404
    with app.app_context():  # the bytes gone: a 304 never reads them
        db.session.execute(sa.delete(MediaVariant))
        db.session.commit()
    again = client.get(body["url"], headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.data == b""
    assert again.headers["ETag"] == tag and "immutable" in again.headers["Cache-Control"]
    assert client.get(body["url"]).status_code == 404


def test_the_post_page_gives_the_sites_images_srcset_and_the_first_its_og_image(app, client,
                                                                                 editor):
    body = upload(editor, made.jpeg((2000, 1000)), alt="Quay").get_json()
    new_post(app, "Boats", "published", slug="boats",
             body=f"{body['markdown']}\n\n![far](https://example.com/far.png)")
    page = text(client.get("/posts/boats"))
    base = f"/media/{body['sha256']}/"
    assert (f'<picture><source type="image/webp" srcset="{base}480.webp 480w, {base}640.webp '
            f'640w, {base}960.webp 960w, {base}1600.webp 1600w" sizes="{SIZES}"><img src="'
            f'{base}orig.jpg" srcset="{base}480.jpg 480w, {base}640.jpg 640w, {base}960.jpg '
            f'960w, {base}1600.jpg 1600w, {base}orig.jpg 2000w"') in page
    assert ('width="2000" height="1000" fetchpriority="high" alt="Quay"></picture>') in page
    assert '<img src="https://example.com/far.png" alt="far">' in page  # others as before
    assert f'<meta property="og:image" content="http://localhost{base}1600.jpg">' in page
    assert "img-src 'self'" in client.get("/posts/boats").headers["Content-Security-Policy"]


def test_a_jpeg_gets_a_webp_copy_of_each_width_served_as_image_webp(app, client, editor):
    body = upload(editor, made.jpeg_with_gps_rotated()).get_json()  # 100 × 300 upright
    big = upload(editor, made.jpeg((2000, 1000))).get_json()
    base = f"/media/{big['sha256']}/"
    for width in (480, 640, 960, 1600):
        copy = client.get(f"{base}{width}.webp")
        assert copy.status_code == 200 and copy.content_type == "image/webp"
        assert Image.open(io.BytesIO(copy.data)).size == (width, width // 2)
        assert len(copy.data) < len(client.get(f"{base}{width}.jpg").data)
    copy, jpeg = client.get(f"{base}480.webp"), client.get(f"{base}480.jpg")
    assert copy.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert copy.headers["Surrogate-Key"] == jpeg.headers["Surrogate-Key"] == \
        f"media-{big['sha256'][:32]}"  # removing the file purges its copies too
    assert copy.headers["ETag"] != jpeg.headers["ETag"]
    assert client.get(f"{base}480.webp",
                      headers={"If-None-Match": copy.headers["ETag"]}).status_code == 304
    assert client.get(f"{base}orig.webp").status_code == 404  # wider than 1600: not needed
    small = client.get(f"/media/{body['sha256']}/orig.webp")  # no wider: the original's copy
    assert small.content_type == "image/webp" and b"Exif" not in small.data
    assert Image.open(io.BytesIO(small.data)).size == (100, 300)
    assert client.get(f"/media/{body['sha256']}/orig.gif").status_code == 404


def test_a_file_stored_before_webp_copies_renders_as_it_did_until_add_webp_makes_them(
        app, client, editor):
    body = upload(editor, made.jpeg((1200, 800)), alt="Quay").get_json()
    with app.app_context():  # as a file uploaded before this release is stored
        db.session.execute(sa.delete(MediaVariant).where(MediaVariant.variant.like("%.webp")))
        db.session.execute(sa.update(MediaFile).values(webp=""))
        db.session.commit()
    new_post(app, "Boats", "published", slug="boats", body=body["markdown"])
    base = f"/media/{body['sha256']}/"
    page = text(client.get("/posts/boats"))
    assert "<picture" not in page and "webp" not in page
    assert (f'<img src="{base}orig.jpg" srcset="{base}480.jpg 480w, {base}640.jpg 640w, '
            f'{base}960.jpg 960w, {base}orig.jpg 1200w"') in page
    assert client.get(f"{base}480.webp").status_code == 404
    runner = app.test_cli_runner()
    assert "1 file given WebP copies." in runner.invoke(args=["add-webp"]).output
    assert "0 files given WebP copies." in runner.invoke(args=["add-webp"]).output
    assert client.get(f"{base}480.webp").content_type == "image/webp"
    new_post(app, "Boats again", "published", slug="boats-2", body=body["markdown"])
    assert (f'<source type="image/webp" srcset="{base}480.webp 480w, {base}640.webp 640w, '
            f'{base}960.webp 960w, {base}orig.webp 1200w"') in text(client.get("/posts/boats-2"))


def test_a_file_used_by_a_post_cannot_be_deleted_and_deleting_an_unused_one_is_audited(
        app, editor):
    used = upload(editor, made.jpeg(), alt="Used").get_json()
    spare = upload(editor, made.image("PNG"), alt="Spare").get_json()
    new_post(app, "Harbour <news>", body=f"Look: {used['markdown']}")
    refused = editor.post(f"/admin/media/{used['id']}/delete",
                          data={"csrf_token": csrf_token(editor)})
    assert refused.status_code == 409
    assert "This file is used by “Harbour &lt;news&gt;”" in text(refused)
    assert count(app, MediaFile) == 2
    done = editor.post(f"/admin/media/{spare['id']}/delete",
                       data={"csrf_token": csrf_token(editor)})
    assert done.status_code == 303
    assert count(app, MediaFile) == 1 and editor.get(spare["url"]).status_code == 404
    assert audit_actions(app)[-1] == "media.delete"
    page = text(editor.get("/admin/media/"))
    assert "In use: cannot be deleted" in page and "Harbour &lt;news&gt;" in page


def test_the_media_page_searches_names_and_alt_text_and_escapes_them(app, editor):
    upload(editor, made.jpeg(), alt="<script>alert(1)</script> gull", name="<i>bird.jpg")
    upload(editor, made.image("PNG"), alt="Lighthouse", name="tower.png")
    page = text(editor.get("/admin/media/?q=gull"))
    assert "&lt;i&gt;bird.jpg" in page and "<script>alert(1)" not in page
    assert "tower.png" not in page
    assert "tower.png" in text(editor.get("/admin/media/?q=LIGHT"))
    assert "No file matches" in text(editor.get("/admin/media/?q=100%25"))


def test_viewers_cannot_see_or_upload_media(app, client, auth):
    auth.login("viewer")
    assert client.get("/admin/media/").status_code == 403
    assert upload(client, made.jpeg()).status_code == 403


def multipart(api, data: bytes | None, alt: str | None = "A gull", role: str = "editor",
              **extra):
    form = {k: v for k, v in {"alt": alt, **extra}.items() if v is not None}
    if data is not None:
        form["file"] = (io.BytesIO(data), "gull.jpg")
    return api.client.post("/api/media", data=form, content_type="multipart/form-data",
                           headers={"Authorization": f"Bearer {api.tokens[role]}"})


def test_the_api_uploads_lists_and_deletes_media(app, api):
    made_file = multipart(api, made.jpeg((1000, 800)))
    assert made_file.status_code == 201, made_file.get_json()
    file_id = made_file.get_json()["id"]
    assert multipart(api, made.jpeg((1000, 800))).status_code == 200  # stored once
    listed = api("GET", "/api/media").get_json()
    assert [f["id"] for f in listed["media"]] == [file_id]
    assert listed["page"] == 1 and listed["has_next"] is False
    assert listed["media"][0]["used_by"] == []
    new_post(app, "Gulls", body=made_file.get_json()["markdown"])
    in_use = api("DELETE", f"/api/media/{file_id}")
    assert in_use.status_code == 409 and in_use.get_json()["posts"][0]["title"] == "Gulls"
    with app.app_context():
        db.session.execute(sa.text("DELETE FROM posts"))
        db.session.commit()
    assert api("DELETE", f"/api/media/{file_id}").status_code == 200
    assert api("DELETE", f"/api/media/{file_id}").status_code == 404


def test_api_refusals_are_json_naming_the_field(app, api):
    cases = [(multipart(api, made.svg()), 422, "file"), (multipart(api, made.jpeg(), alt=None),
                                                         422, "alt"),
             (multipart(api, None), 422, "file"), (multipart(api, made.jpeg(), extra="x"), 422,
                                                   "extra"),
             (multipart(api, made.jpeg(), role="viewer"), 403, None),
             (api("POST", "/api/media", body={"alt": "x"}), 415, "file"),
             (api("GET", "/api/media?page=0"), 422, "page")]
    app.config["MEDIA_MAX_BYTES"] = 1000
    cases.append((multipart(api, b"\xff" * 200_000), 413, "file"))
    for answer, status, field in cases:
        assert answer.status_code == status, answer.get_json()
        assert answer.get_json().get("field") == field, json.dumps(answer.get_json())
    assert count(app, MediaFile) == 0


def test_media_work_on_sqlite(sqlite_app):
    client = sqlite_app.test_client()
    AuthActions(client).login("editor")
    body = upload(client, made.jpeg((1200, 900))).get_json()
    served = client.get(body["url"])
    assert served.status_code == 200 and served.content_type == "image/jpeg"
    assert client.get(f"/media/{body['sha256']}/960.jpg").status_code == 200
    assert client.get(f"/media/{body['sha256']}/960.webp").content_type == "image/webp"
    assert upload(client, made.jpeg((1200, 900))).status_code == 200


def test_a_file_only_a_pending_scheduled_change_uses_cannot_be_deleted(app, editor):
    pending = upload(editor, made.jpeg(), alt="For the sale").get_json()
    post_id = new_post(app, "Sale", status="published", body="No picture yet.")
    with app.app_context():
        db.session.add(ScheduledChange(post_id=post_id, title="Sale", base_version=1,
                                       body=f"Now: {pending['markdown']}", base_digest="",
                                       apply_at=datetime(2031, 1, 1, tzinfo=UTC), author=""))
        db.session.commit()
    refused = editor.post(f"/admin/media/{pending['id']}/delete",
                          data={"csrf_token": csrf_token(editor)})
    assert refused.status_code == 409 and "“Sale (its scheduled change)”" in text(refused)
    assert count(app, MediaFile) == 1


def test_a_part_without_a_usable_name_is_refused_as_unknown_not_a_500(app, api):
    # found by the contract fuzz: a part named "\" reaches the app named None
    body = (b'--b\r\nContent-Disposition: form-data; name="\\"\r\n\r\nx\r\n'
            b'--b\r\nContent-Disposition: form-data; name="extra"\r\n\r\ny\r\n'
            b'--b\r\nContent-Disposition: form-data; name="alt"\r\n\r\nA harbour\r\n--b--\r\n')
    answer = api.client.post("/api/media", data=body, headers={
        "Authorization": f"Bearer {api.tokens['editor']}",
        "Content-Type": "multipart/form-data; boundary=b"})
    assert answer.status_code == 422, answer.get_data(as_text=True)[:300]
    assert "unknown field" in answer.get_json()["detail"]
    assert count(app, MediaFile) == 0
