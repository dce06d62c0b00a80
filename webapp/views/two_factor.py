"""Settings: switch TOTP two-factor sign-in on (with a QR code) and off, recovery codes."""

from flask import Blueprint, Response, abort, flash, redirect, render_template, request, url_for
from flask_login import current_user, login_required

from ..accounts import throttle, totp
from ..accounts.security import client_address
from ..accounts.stepup import step_up
from ..accounts.users import user_target
from ..extensions import db
from ..ops import audit

bp = Blueprint("two_factor", __name__, url_prefix="/settings/two-factor")

NO_STORE = {"Cache-Control": "no-store"}  # a secret or recovery codes: kept by no cache


def _page(status: int = 200, headers: dict | None = None, **context):
    context.setdefault("errors", {})
    secret = totp.pending_secret(current_user)
    return render_template(
        "auth/two_factor.html", on=totp.is_on(current_user), secret=secret,
        left=totp.recovery_codes_left(current_user) if totp.is_on(current_user) else 0,
        **context), status, {**NO_STORE, **(headers or {})}


@bp.get("/")
@login_required
def index():
    """Show two-factor's state: off, being set up (the QR code), or on."""
    return _page()


@bp.post("/start")
@login_required
@step_up
def start():
    """Make a new secret to scan; two-factor is on only once a code confirms it."""
    if totp.is_on(current_user):
        flash("Two-factor sign-in is on already: turn it off first to move to a new app.",
              "info")
    else:
        totp.start(current_user)
        audit.record("user.two_factor_setup", user_target(current_user), {"method": "totp"})
        db.session.commit()
    return redirect(url_for("two_factor.index"), code=303)


@bp.get("/qr.svg")
@login_required
def qr():
    """The QR code of the secret being set up, as an SVG image."""
    secret = totp.pending_secret(current_user)
    if secret is None:
        abort(404)
    svg = totp.qr_svg(totp.provisioning_uri(current_user, secret))
    return Response(svg, mimetype="image/svg+xml", headers=NO_STORE)


@bp.post("/confirm")
@login_required
def confirm():
    """Switch two-factor on with a code typed from the app; show the recovery codes once."""
    codes = totp.confirm(current_user, request.form.get("code", ""))
    if codes is None:
        return _page(422, errors={"code": "That code does not match: type the 6 digits "
                                          "your app shows now for this site."})
    audit.record("user.two_factor_on", user_target(current_user), {"method": "totp"})
    db.session.commit()
    return _page(codes=codes)


def _code_refused(door: str):
    """Check the form's code (or a recovery code) under the sign-in limits: return the page
    that refuses it, or None when it proves the second factor (its step is then spent)."""
    code = request.form.get("code", "")
    tried = throttle.attempt(door, current_user.email, client_address(), current_user)
    wait = tried.wait(throttle.code_kind(code))
    if wait:  # unchecked: the code stays in the field, to send again once the wait is over
        return _page(429, throttle.retry_after(wait), typed=code, errors={
            "code": f"Too many wrong codes. Try again in {throttle.wait_message(wait)}."})
    how = totp.check(current_user, code)
    if how is None:
        db.session.rollback()
        tried.wrong(throttle.code_kind(code))
        return _page(422, errors={"code": "That code is not right, or was used already."})
    tried.passed(how)
    return None


@bp.post("/recovery-codes")
@login_required
def recovery_codes():
    """Replace the recovery codes (a current code required); show the new ones once."""
    if not totp.is_on(current_user):
        abort(404)
    refused = _code_refused("recovery codes")
    if refused is not None:
        return refused
    codes = totp.regenerate(current_user)
    audit.record("user.recovery_codes", user_target(current_user), {})
    db.session.commit()
    return _page(codes=codes)


@bp.post("/off")
@login_required
def off():
    """Switch two-factor off (a current code, or a recovery code, required)."""
    if not totp.is_on(current_user):
        return redirect(url_for("two_factor.index"), code=303)
    refused = _code_refused("two-factor off")
    if refused is not None:
        return refused
    totp.turn_off(current_user)
    audit.record("user.two_factor_off", user_target(current_user), {"method": "totp"})
    db.session.commit()
    flash("Two-factor sign-in is off: your password alone signs you in.", "success")
    return redirect(url_for("two_factor.index"), code=303)
