"""Images from the post editor in real headless Chromium: the button, a drop and a paste.

Each uploads a file built in the page, asks for its alt text, and puts the image's
Markdown at the cursor; the preview then shows the image, served by content address.
The app is served from a thread of the test process (tests.harness.support.serve).
"""

import pytest

from tests.harness.support import add_user, serve, sign_in_page

pytestmark = pytest.mark.slow

# a 2×2 red PNG, made in the page: a File as a drop or a paste carries it
MAKE_FILE = """async (name) => {
  const canvas = document.createElement("canvas");
  canvas.width = 2; canvas.height = 2;
  const context = canvas.getContext("2d");
  context.fillStyle = name.includes("drop") ? "#00f" : name.includes("paste") ? "#0f0" : "#f00";
  context.fillRect(0, 0, 2, 2);
  const blob = await new Promise((done) => canvas.toBlob(done, "image/png"));
  window.madeFile = new File([blob], name, {type: "image/png"});
}"""
DROP = """() => {
  const transfer = new DataTransfer();
  transfer.items.add(window.madeFile);
  const body = document.getElementById("f-body");
  const init = {dataTransfer: transfer, bubbles: true, cancelable: true};
  body.dispatchEvent(new DragEvent("dragover", init));
  body.dispatchEvent(new DragEvent("drop", init));
}"""
PASTE = """() => {
  const transfer = new DataTransfer();
  transfer.items.add(window.madeFile);
  document.getElementById("f-body").dispatchEvent(
    new ClipboardEvent("paste", {clipboardData: transfer, bubbles: true, cancelable: true}));
}"""


@pytest.fixture
def editor_tab(app, browser):
    from playwright.sync_api import expect

    add_user(app, "editor@example.com", "editor")
    with serve(app) as url:
        context = browser.new_context(base_url=url)
        tab = context.new_page()
        sign_in_page(tab, "editor@example.com")
        tab.goto("/admin/posts/new")
        expect.set_options(timeout=15_000)
        yield tab
        expect.set_options(timeout=5_000)
        context.close()


def _cursor_after(tab, text: str) -> None:
    tab.fill("#f-body", text)
    tab.evaluate("() => { const b = document.getElementById('f-body'); "
                 "b.focus(); b.setSelectionRange(b.value.length, b.value.length); }")


def _upload_in_dialog(tab, alt: str) -> None:
    from playwright.sync_api import expect

    expect(tab.locator("#media-dialog")).to_be_visible()
    tab.fill("#f-media-alt", alt)
    tab.keyboard.press("Enter")  # the dialog's form: Upload and insert
    expect(tab.locator("#media-dialog")).to_be_hidden()


def test_the_add_image_button_uploads_with_alt_text_and_inserts_the_markdown(editor_tab):
    from playwright.sync_api import expect

    tab = editor_tab
    _cursor_after(tab, "Before ")
    tab.get_by_role("button", name="Add image…").click()
    # the file input is keyboard-reachable and labelled; a refusal keeps the alt text
    expect(tab.locator("label[for=f-media-file]")).to_contain_text("Image")
    tab.get_by_label("Alt text").fill("Red <dot>")
    tab.keyboard.press("Enter")
    expect(tab.locator("#e-media-file")).to_have_text("Choose an image.")
    tab.locator("#f-media-file").set_input_files({"name": "button.png", "mimeType": "image/png",
                                               "buffer": _png()})
    expect(tab.get_by_label("Alt text")).to_have_value("Red <dot>")
    tab.get_by_role("button", name="Upload and insert").click()
    expect(tab.locator("#media-dialog")).to_be_hidden()
    expect(tab.locator("#f-body")).to_have_value(
        _markdown_pattern(r"Before !\[Red \\<dot\\>\]"))
    expect(tab.locator("#preview img[alt='Red <dot>']")).to_have_js_property("complete", True)
    shown = tab.locator("#preview img").evaluate(
        "img => [img.naturalWidth > 0, img.getAttribute('width'), img.currentSrc]")
    # served and loaded: Chromium takes the <picture>'s WebP copy of the PNG
    assert shown[:2] == [True, "2"] and shown[2].endswith("/orig.webp")


def test_dropping_and_pasting_an_image_into_the_body_upload_it_at_the_cursor(editor_tab):
    from playwright.sync_api import expect

    tab = editor_tab
    _cursor_after(tab, "Dropped: ")
    tab.evaluate(MAKE_FILE, "drop.png")
    tab.evaluate(DROP)
    expect(tab.locator("#media-picked")).to_have_text("To upload: drop.png")
    _upload_in_dialog(tab, "Blue dot")
    expect(tab.locator("#f-body")).to_have_value(_markdown_pattern(r"Dropped: !\[Blue dot\]"))
    tab.evaluate("() => { const b = document.getElementById('f-body'); "
                 "b.value += '\\nPasted: '; b.setSelectionRange(b.value.length, b.value.length); }")
    tab.evaluate(MAKE_FILE, "paste.png")
    tab.evaluate(PASTE)
    _upload_in_dialog(tab, "Green dot")
    expect(tab.locator("#f-body")).to_have_value(_markdown_pattern(
        r"Dropped: !\[Blue dot\]\(/media/[0-9a-f]{64}/orig\.png\)\nPasted: !\[Green dot\]"))
    expect(tab.locator("#preview img")).to_have_count(2)


def _markdown_pattern(start: str):
    import re

    return re.compile("^" + start + r"\(/media/[0-9a-f]{64}/orig\.png\)$")


def _png() -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (2, 2), (255, 0, 0)).save(buffer, "PNG")
    return buffer.getvalue()
