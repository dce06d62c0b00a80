"""Step-up: a second look before dangerous actions.

A session left open on a shared computer must not be enough to reset every password,
evict the leaders or send every post to an attacker's webhook. A view marked @step_up
runs on POST only if this session's last proof (the sign-in, or a step-up) is at most
STEP_UP_MINUTES old; otherwise it answers 401 with a prompt for the password (or, with
two-factor on, a code from the app) that carries every field of the form as it was
typed, and posts it all back to the same address. API tokens are unchanged: they are
their own factor.
"""

import time
from functools import wraps

from flask import current_app, g, render_template, request, session
from flask_login import current_user

from ..extensions import db
from . import throttle, totp
from .security import client_address

GUARDED: set[str] = set()  # the endpoints that ask (tests/test_step_up.py lists them all)
FIELDS = ("step_up_password", "step_up_code")


def proved(how: str) -> None:
    """Record that this session just proved who it is (the sign-in, or a step-up)."""
    session["proved_at"], session["proved_by"] = time.time(), how


def fresh() -> bool:
    """Return whether this session's last proof is recent enough for a dangerous action."""
    minutes = current_app.config.get("STEP_UP_MINUTES", 10.0)
    return time.time() - session.get("proved_at", 0) <= minutes * 60


def step_up(view):
    """Ask again for a proof before view's POST when the session's last one is too old."""
    GUARDED.add(f"{view.__module__.rsplit('.', 1)[-1]}.{view.__name__}")

    @wraps(view)
    def guarded(*args, **kwargs):
        if request.method != "POST":
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

    return guarded


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
    how = totp.check(current_user, code) if method != "password" else None
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
