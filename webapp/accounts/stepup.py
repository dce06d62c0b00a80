"""Step-up: a second look before dangerous actions, and the registry of every route that
changes something.

A session left open on a shared computer must not be enough to reset every password,
make an admin, mint an API token, evict the leaders or send every post to an attacker's
webhook. A view marked @step_up runs on a POST (PUT, PATCH, DELETE) only if this
session's last proof (the sign-in, or a step-up) is at most STEP_UP_MINUTES old;
otherwise it answers 401 with a prompt for the password (or, with two-factor on, a code
from the app) that carries every field of the form as it was typed, and posts it all back
to the same address.

An API token proves nothing fresh: it was made once and is sent by a script for months.
It does a dangerous action only when it was made to (ApiToken.dangerous_actions, a box
ticked when it is made, which itself asks for a fresh proof); an everyday token is
refused with 403 naming how to get one. So a leaked deploy token writes posts, and
cannot add a webhook endpoint.

The registry is declared once: @step_up marks a view dangerous (dangerous_endpoints lists
them from the app), and every other route that changes something is in HARMLESS, with the
reason a session's old proof is enough for it. tests/test_step_up.py walks app.url_map
(web and API, every POST, PUT, PATCH and DELETE) and fails on a route in neither, so a
new route cannot forget to say.
"""

import time
from functools import wraps

from flask import Flask, abort, current_app, g, render_template, request, session
from flask_login import current_user

from ..extensions import db
from . import throttle, totp
from .security import client_address

FIELDS = ("step_up_password", "step_up_code")
READS = ("GET", "HEAD", "OPTIONS")  # what a dangerous view may answer without a proof
TOKEN_REFUSAL = ("This action needs a token made for dangerous actions: an everyday token "
                 "may not do it. Make one under Settings → API tokens with “May do dangerous "
                 "actions” ticked, or with `flask --app webapp create-token EMAIL "
                 "--dangerous-actions`.")


def proved(how: str) -> None:
    """Record that this session just proved who it is (the sign-in, or a step-up)."""
    session["proved_at"], session["proved_by"] = time.time(), how


def fresh() -> bool:
    """Return whether this session's last proof is recent enough for a dangerous action."""
    minutes = current_app.config["STEP_UP_MINUTES"]
    return time.time() - session.get("proved_at", 0) <= minutes * 60


def step_up(view):
    """Mark view dangerous: ask again for a proof before a change when the session's last
    one is too old; refuse it to a token not made for dangerous actions."""

    @wraps(view)
    def guarded(*args, **kwargs):
        if request.method in READS:
            return view(*args, **kwargs)
        if g.get("api_user") is not None:  # the API (authenticate refused the rest already)
            if not token_may(g.api_user):
                abort(403, TOKEN_REFUSAL)
            g.step_up_proof = "a token made for dangerous actions"
            return view(*args, **kwargs)
        error, wait = (None, 0) if fresh() else _check_proof()
        if error is None:
            g.step_up_proof = _proof_words()
            return view(*args, **kwargs)
        form = [(k, v) for k, v in request.form.items(multi=True)
                if k not in FIELDS and k != "csrf_token"]
        from . import passkeys

        page = render_template("auth/step_up.html", form=form, error=error,
                               code=totp.is_on(current_user),
                               passkey=passkeys.has_any(current_user))
        return (page, 429, throttle.retry_after(wait)) if wait else (page, 401)

    guarded.needs_fresh_proof = True  # type: ignore[attr-defined]  # kept by functools.wraps
    return guarded


def needs_fresh_proof(view) -> bool:
    """Return whether view (a view function, as the app holds it) is marked @step_up."""
    return bool(getattr(view, "needs_fresh_proof", False))


def dangerous_endpoints(app: Flask) -> set[str]:
    """Return the endpoints of app's dangerous actions: the views marked @step_up."""
    return {name for name, view in app.view_functions.items() if needs_fresh_proof(view)}


def token_may(user) -> bool:
    """Return whether the token user came with (webapp.accounts.tokens) was made for
    dangerous actions."""
    return bool(getattr(user, "api_token_dangerous", False))


def _proof_words() -> str:
    """Say how this session proved itself, for the audit log: "password 3 min ago"."""
    age = max(0, int(time.time() - session.get("proved_at", time.time())) // 60)
    return f"{session.get('proved_by', 'password')} {age} min ago" if age else \
        f"{session.get('proved_by', 'password')} just now"


def _check_proof() -> tuple[str | None, int]:
    """Check the prompt's answer, if one came (under the sign-in limits); return None when
    it proves the user, else what to say ("" for a first prompt), and the seconds a
    throttled answer must wait."""
    password = request.form.get("step_up_password")
    code = request.form.get("step_up_code")
    if not password and not code:
        return ("" if password is None and code is None else "Type your password."), 0
    tried = throttle.attempt("step-up", current_user.email, client_address(), current_user)
    method = throttle.code_kind(code) if code and totp.is_on(current_user) else "password"
    wait = tried.wait(method)
    if wait:
        return f"Too many wrong tries. Try again in {throttle.wait_message(wait)}.", wait
    how = totp.check(current_user, code) if method != "password" and code else None
    if how is None and password and current_user.check_password(password):
        how = "password"
    if how is None:
        db.session.rollback()
        tried.wrong(method)
        return "That did not match. Type your password again" + (
            ", or a code from your app." if totp.is_on(current_user) else "."), 0
    tried.passed(how)  # commits: a code's step is used up
    proved(how)
    return None, 0


EVERYDAY = "an editor's everyday work: kept in the revisions and the audit log, undone there"
ENDS_ACCESS = "takes access away (one session or token) and gives none"
TIMERS = ("runs installed plugin actions on a schedule (the audit trail keeps a month "
          "whatever the parameters)")
MEDIA = "an editor's everyday work: an image added or an unused one removed, audited"
UNSAVED = ("one's own unsaved text (autosave): never a version of the post, never anyone "
           "else's; nobody but its typist reads it")

# every other route that changes something, and why the session's last proof, however old,
# is enough for it (tests/test_step_up.py fails on a route in neither this nor @step_up)
HARMLESS: dict[str, str] = {
    # signing in and out, and the proofs themselves
    "auth.login": "signing in: it is the proof",
    "auth.second_factor": "signing in: the second step of the proof",
    "passkeys.sign_in_options": "signing in: a challenge (bounded per address)",
    "passkeys.sign_in": "signing in with a passkey: it is the proof",
    "passkeys.step_up_options": "a challenge for the step-up's own proof",
    "passkeys.step_up": "the step-up's own proof",
    "auth.logout": "ends this session",
    # one's own settings that ask for a proof of their own
    "auth.settings": "a new password needs the current one, under the sign-in limits",
    "two_factor.confirm": "finishes a setup begun with a fresh proof (two_factor.start), "
                          "with a code from the app",
    "two_factor.off": "takes a current code from the app",
    "two_factor.recovery_codes": "takes a current code from the app",
    "passkeys.registration_options": "answers only a session proved lately (401 otherwise)",
    "passkeys.register": "needs a challenge only a session proved lately is given",
    # ending access
    "auth.end_own_session": ENDS_ACCESS,
    "auth.revoke_api_token": ENDS_ACCESS,
    "users.end_session": ENDS_ACCESS,
    "users.revoke_token": ENDS_ACCESS,
    # editors' everyday work, in the browser and with a token
    "posts.new": EVERYDAY, "posts.edit": EVERYDAY, "posts.schedule": EVERYDAY,
    "posts.unschedule": EVERYDAY, "posts.publish": EVERYDAY, "posts.unpublish": EVERYDAY,
    "posts.unpublish_time": EVERYDAY, "calendar.move": EVERYDAY,
    "revisions.restore": EVERYDAY, "revisions.change": EVERYDAY,
    "revisions.cancel_change": EVERYDAY,
    "releases.create": EVERYDAY, "releases.save": EVERYDAY, "releases.add": EVERYDAY,
    "releases.remove": EVERYDAY, "releases.cancel": EVERYDAY,
    "releases.preview": "a link that reads one release's posts, expiring and revocable; audited",
    "releases.revoke_preview": "ends a preview link",
    "posts.preview": "renders the Markdown typed; changes nothing",
    "previews.create": "a link that reads one post, expiring and revocable; audited",
    "previews.revoke": "ends a preview link",
    "media.upload": MEDIA, "media.delete": MEDIA,
    "timers.create": TIMERS, "timers.edit": TIMERS, "timers.delete": TIMERS,
    "timers.pause": TIMERS, "timers.resume": TIMERS, "timers.run_now": TIMERS,
    "api.create_release": EVERYDAY, "api.update_release": EVERYDAY,
    "api.cancel_release": EVERYDAY,
    "api.create_post": EVERYDAY, "api.update_post": EVERYDAY, "api.publish_post": EVERYDAY,
    "api.restore_revision": EVERYDAY, "api.create_change": EVERYDAY,
    "api.update_change": EVERYDAY, "api.cancel_change": EVERYDAY,
    "api.run_timer": TIMERS, "api.upload_media": MEDIA, "api.delete_media": MEDIA,
    "autosaves.keep": UNSAVED, "autosaves.keep_new": UNSAVED, "autosaves.discard": UNSAVED,
    "autosaves.discard_new": UNSAVED, "api.put_autosave": UNSAVED,
    "api.delete_autosave": UNSAVED,
    # review: a step of the editors' everyday work, each audited and told by webhook
    "posts.submit": EVERYDAY, "posts.approve": EVERYDAY, "posts.send_back": EVERYDAY,
    "api.submit_post": EVERYDAY, "api.approve_post": EVERYDAY, "api.return_post": EVERYDAY,
    "site_settings.review": ("who must be reviewed before publishing: audited, and the admin "
                             "who may change it may publish anyway"),
    # admins' changes that give no access and send nothing anywhere new
    "plugins.switch": "switches installed code on or off: installs none, adds no receiver",
    "site_settings.save": "what readers see of the site (its name, its description); audited",
    "webhooks.delete": "removes a receiver: sends nothing anywhere new",
    "webhooks.redeliver": "sends again to a receiver an admin added with a fresh proof",
    "webhooks.send_test": "sends a test to a receiver an admin added with a fresh proof",
}
