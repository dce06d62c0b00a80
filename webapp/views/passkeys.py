"""Passkeys: register, list and remove under Settings; sign in with one alone."""

from flask import (
    Blueprint,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import current_user, login_required

from ..accounts import passkeys, ratelimit, signin, stepup, throttle
from ..accounts.security import client_address, is_safe_next
from ..accounts.stepup import fresh
from ..accounts.users import user_target
from ..extensions import db
from ..models import User
from ..ops import audit

bp = Blueprint("passkeys", __name__)


def _refused(message: str, status: int = 422):
    return jsonify(error=message), status


@bp.get("/settings/passkeys")
@login_required
def index():
    """List the user's passkeys, with a button to add one and one to remove each."""
    return render_template("auth/passkeys.html", keys=passkeys.listed(current_user),
                           available=passkeys.relying_party() is not None, fresh=fresh())


@bp.post("/settings/passkeys/confirm")
@login_required
@stepup.step_up
def confirm():
    """Prove the session again before adding a passkey (the step-up prompt, then back)."""
    return redirect(url_for("passkeys.index"), code=303)


@bp.post("/settings/passkeys/options")
@login_required
def registration_options():
    """Options for navigator.credentials.create (a challenge stored for 5 minutes); only
    for a session that proved itself lately: a passkey added is a way in for good."""
    if not fresh():
        return _refused("Confirm it is you first (the button above), then add the passkey.",
                        401)
    return _options(lambda: passkeys.registration_options(current_user))


def _options(make):
    """Answer a ceremony's options (JSON, kept by no cache), or why they cannot be made."""
    try:
        text = make()
    except passkeys.PasskeyError as exc:
        return _refused(str(exc))
    return text, 200, {"Content-Type": "application/json", "Cache-Control": "no-store"}


@bp.post("/settings/passkeys")
@login_required
def register():
    """Keep the passkey the browser made, once its answer matches the challenge."""
    body = request.get_json(silent=True) or {}
    try:
        made = passkeys.register(current_user, body.get("credential") or {},
                                 str(body.get("name", "")))
    except passkeys.PasskeyError as exc:
        return _refused(str(exc))
    audit.record("user.passkey_add", user_target(current_user), {"name": made.name})
    db.session.commit()
    flash(f"Passkey “{made.name}” added: you can sign in with it now.", "success")
    return jsonify(redirect=url_for("passkeys.index"))


@bp.post("/settings/passkeys/<int:passkey_id>/remove")
@login_required
@stepup.step_up
def remove(passkey_id: int):
    """Remove one of the user's passkeys."""
    gone = passkeys.remove(current_user, passkey_id)
    if gone is not None:
        audit.record("user.passkey_remove", user_target(current_user), {"name": gone.name})
        db.session.commit()
        flash(f"Passkey “{gone.name}” removed.", "success")
    return redirect(url_for("passkeys.index"), code=303)


@bp.post("/login/passkey/options")
def sign_in_options():
    """Options for navigator.credentials.get: any passkey of this site, or, as the second
    step after a password, that account's. Each is a stored challenge, asked for without
    any proof: so many per address (webapp.accounts.ratelimit), then 429."""
    address = client_address()
    wait = ratelimit.wait_seconds("passkey-options", address)
    if wait:
        return jsonify(error="Too many sign-in attempts from this address: try again in "
                             f"{throttle.wait_message(wait)}."), 429, {"Retry-After": str(wait)}
    ratelimit.record("passkey-options", address)
    pending = session.get("second_factor") or {}
    user = db.session.get(User, pending["user"]) if pending.get("user") else None
    return _options(lambda: passkeys.authentication_options(user))


def _proved_by_passkey(door: str, expected: User | None) -> User | tuple:
    """Check the passkey answer in the request's JSON (for expected's account, if given):
    return its user, or the refusal to answer; either way the decision is logged."""
    body = request.get_json(silent=True) or {}
    try:
        user = passkeys.authenticate(body.get("credential") or {})
    except passkeys.PasskeyError as exc:
        if exc.ours:
            owner = exc.owner or expected
            throttle.attempt(door, owner.email if owner else "", client_address(),
                             owner).refused("passkey", str(exc))
        return _refused(str(exc), 401)
    if expected is not None and expected.id != user.id:
        refusal = "This passkey is someone else's."
        throttle.attempt(door, expected.email, client_address(), expected).refused(
            "passkey", f"{refusal} ({user.email})")
        return _refused(refusal, 401)
    return user


@bp.post("/login/passkey")
def sign_in():
    """Sign in with the passkey whose answer signed a challenge of ours."""
    pending = session.get("second_factor") or {}
    expected = db.session.get(User, pending["user"]) if pending.get("user") else None
    user = _proved_by_passkey("second step" if pending else "sign-in", expected)
    if not isinstance(user, User):
        return user
    body = request.get_json(silent=True) or {}
    next_url = str(pending.get("next") or body.get("next", ""))
    signin.start_without_password(user, client_address(),
                                  "password + passkey" if pending else "passkey")
    return jsonify(redirect=next_url if is_safe_next(next_url) else url_for("dashboard.index"))


@bp.post("/settings/step-up/passkey/options")
@login_required
def step_up_options():
    """Options for a step-up with one of the signed-in user's passkeys."""
    return _options(lambda: passkeys.authentication_options(current_user))


@bp.post("/settings/step-up/passkey")
@login_required
def step_up():
    """Prove the signed-in user again with their passkey (the step-up prompt's button)."""
    from ..accounts import stepup

    user = _proved_by_passkey("step-up", current_user)
    if not isinstance(user, User):
        return user
    throttle.attempt("step-up", user.email, client_address(), user).passed("passkey")
    stepup.proved("passkey")
    return jsonify(ok=True)
