"""Autosave in real Chromium: type, SIGKILL the browser (no unload, no beacon: a crash),
open the post again in another browser, and at most the last 5 s of typing are lost; a
New post's text survives too, and text typed just before leaving a page is sent as it
goes. The killed Chromium is one of this test's own, never the session's `browser`."""

import contextlib

import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.crash import killed, own_chromium, seconds_lost, type_for
from tests.harness.support import add_user, serve, sign_in_page
from webapp.extensions import db
from webapp.models import PostAutosave
from webapp.posts import create_post

pytestmark = pytest.mark.slow

LOST_AT_MOST = 5.0  # seconds of typing the issue allows a crash to lose
TYPING = 6.0  # seconds of typing before the kill: longer than LOST_AT_MOST, and short


def test_a_killed_browser_loses_at_most_the_last_5_s_of_typing(app, browser, tmp_path):
    from playwright.sync_api import expect

    add_user(app, "editor@example.com", "editor")
    with app.app_context():
        post_id = create_post("Crash course", "crash-course", "Saved first line.").id
        db.session.remove()
    with serve(app) as url, own_chromium(browser.browser_type, tmp_path / "profile") as (
            proc, doomed):
        context = doomed.new_context(base_url=url)
        new_tab, tab = context.new_page(), context.new_page()
        sign_in_page(tab, "editor@example.com")
        new_tab.goto("/admin/posts/new")
        new_tab.fill("#f-title", "Not saved yet")
        new_tab.locator("#f-body").press_sequentially("A new post, never saved.")
        tab.goto(f"/admin/posts/{post_id}")
        tab.locator("#f-body").press("End")
        typing = type_for(tab, TYPING)  # New post's tab autosaves meanwhile
        killed_at = killed(proc)  # a crash: no pagehide, no beacon
        with contextlib.suppress(Exception):
            doomed.close()
    assert typing[0][0] < killed_at - LOST_AT_MOST, "typing must last longer than the loss"
    with serve(app) as url:
        fresh = browser.new_context(base_url=url)
        page = fresh.new_page()
        sign_in_page(page, "editor@example.com")
        page.goto(f"/admin/posts/{post_id}")
        expect(page.locator("#autosave-offer")).to_contain_text("were kept")
        page.click("#autosave-offer button:text('Restore')")
        kept = page.locator("#f-body").input_value().removeprefix("Saved first line.")
        assert typing[-1][1].startswith(kept)  # as typed, nothing else
        assert seconds_lost(typing, kept, killed_at) <= LOST_AT_MOST
        status = page.locator("#autosave-status")  # the line beside Save says what happened
        page.locator("#f-body").press("End")
        page.locator("#f-body").press_sequentially(" More")
        fresh.set_offline(True)
        expect(status).to_have_text("Not saved: offline")
        fresh.set_offline(False)  # back online: sent at once
        expect(status).to_contain_text("Saved a draft")
        page.goto("/admin/posts/new?restore=1")
        expect(page.locator("#f-title")).to_have_value("Not saved yet")
        expect(page.locator("#f-body")).to_have_value("A new post, never saved.")
        # leaving at once, well inside the 2 s wait: the page's last breath sends the text
        page.locator("#f-body").press("End")
        page.locator("#f-body").press_sequentially(" Then left")
        page.on("dialog", lambda dialog: dialog.accept())  # "leave with unsaved changes?"
        page.goto("/admin/")
        wait_for(lambda: kept_new_body(app).endswith("Then left"), 10,
                 "the text sent as the page went", state=lambda: kept_new_body(app))
        fresh.close()


def kept_new_body(app) -> str:
    with app.app_context():
        body = db.session.scalar(sa.select(PostAutosave.body)
                                 .where(PostAutosave.post_id.is_(None)))
        db.session.remove()
        return body or ""


def test_the_status_line_names_a_refused_field_and_tells_a_signed_out_session_apart(app,
                                                                                    browser):
    # a NUL pasted into the body is refused naming the field, not told as "signed out";
    # a session that ended still is
    from playwright.sync_api import expect

    add_user(app, "editor@example.com", "editor")
    with app.app_context():
        post_id = create_post("Pasted", "pasted", "Saved.").id
        db.session.remove()
    with serve(app) as url:
        context = browser.new_context(base_url=url)
        page = context.new_page()
        try:
            sign_in_page(page, "editor@example.com")
            page.goto(f"/admin/posts/{post_id}")
            status = page.locator("#autosave-status")
            page.locator("#f-body").fill("Pasted \u0000 from a terminal.")
            expect(status).to_contain_text("Not saved: body: Text with a NUL character")
            page.locator("#f-body").fill("Pasted from a terminal.")
            expect(status).to_contain_text("Saved a draft")
            context.clear_cookies()
            page.locator("#f-body").fill("Typed after the session ended.")
            expect(status).to_have_text("Not saved: you are signed out; sign in again in "
                                        "another tab")
        finally:
            context.close()
