"""Sign in, sign out, and the signed-in user's own settings, sessions and API tokens."""

import time
from typing import Any

from flask import (
    Blueprint,
    abort,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import current_user, login_required, logout_user

from ..accounts import devices, passkeys, sessions, signin, stepup, throttle, totp
from ..accounts.browsers import browser_name
from ..accounts.emails import normalise
from ..accounts.security import client_address, is_safe_next
from ..accounts.tokens import create_token, list_tokens
from ..accounts.users import (
    change_password,
    check_credentials,
    end_one,
    password_errors,
    set_timezone,
)
from ..extensions import db
from ..models import User
from ..timezones import is_zone, zone_names

bp = Blueprint("auth", __name__)
bp.add_app_template_filter(browser_name, "browser_name")  # sessions, trusted browsers

TOKEN_DAYS = {"30": 30, "90": 90, "365": 365, "": None}  # the settings form's choices


@bp.route("/login", methods=["GET", "POST"])
def login():
    """Show the sign-in form; sign in on POST."""
    next_url = request.values.get("next", "")
    if current_user.is_authenticated:
        return redirect(next_url if is_safe_next(next_url) else url_for("dashboard.index"))
    if request.method != "POST":  # GET or HEAD: never a write
        return render_template("auth/login.html", email="", next=next_url)
    email = normalise(request.form.get("email", ""))[:254]
    address = client_address()
    tried = throttle.attempt("sign-in", email, address)
    wait = tried.wait("password")
    if wait:
        # answered at once, the password unchecked: no thread waits, no guess is tried
        flash(f"Too many failed sign-ins. Try again in {throttle.wait_message(wait)}.", "error")
        page = render_template("auth/login.html", email=email, next=next_url)
        return page, 429, throttle.retry_after(wait)
    user = check_credentials(email, request.form.get("password", ""))
    if user is None:
        tried.wrong("password")
        flash("Wrong email or password.", "error")
        return render_template("auth/login.html", email=email, next=next_url), 401
    if totp.is_on(user) or passkeys.has_any(user):  # the password was right: now the
        # second step (a code, or a passkey), before any session
        tried.passed("password", then="second step")
        session.clear()
        session["second_factor"] = {"user": user.id, "at": time.time(), "next": next_url,
                                    "zone": request.form.get("zone", "")}
        return redirect(url_for("auth.second_factor"), code=303)
    return _signed_in(user, address, tried.device_id, next_url, request.form.get("zone", ""),
                      "password")


def _signed_in(user: User, address: str, device_id: int | None, next_url: str, zone: str,
               method: str):
    """Finish a sign-in whose every proof is in (method: "password + totp") and say where
    to go."""
    _adopt_browser_zone(user, zone)
    signin.start(user, address, device_id, method)
    if user.must_change_password:
        flash("Choose a new password to finish setting up your account.", "info")
        return redirect(url_for("auth.settings"))
    return redirect(next_url if is_safe_next(next_url) else url_for("dashboard.index"))


SECOND_FACTOR_SECONDS = 300  # how long a right password waits for its code


@bp.route("/login/code", methods=["GET", "POST"])
def second_factor():
    """The second step of a sign-in with two-factor on: a code from the app, or a
    recovery code; throttled like passwords."""
    pending = session.get("second_factor") or {}
    user = db.session.get(User, pending.get("user", 0)) if pending else None
    if user is None or not user.active or time.time() - pending.get("at", 0) > \
            SECOND_FACTOR_SECONDS:
        session.pop("second_factor", None)
        flash("Sign in again: the code was not typed in time.", "info")
        return redirect(url_for("auth.login"), code=303)
    if request.method != "POST":
        return render_template("auth/code.html", errors={}, **_second_steps(user))
    address, code = client_address(), request.form.get("code", "")
    tried = throttle.attempt("second step", user.email, address, user)
    wait = tried.wait(throttle.code_kind(code))
    if wait:
        errors = {"code": f"Too many wrong codes. Try again in {throttle.wait_message(wait)}."}
        return render_template("auth/code.html", errors=errors, typed=code,
                               **_second_steps(user)), 429, throttle.retry_after(wait)
    how = totp.check(user, code)
    if how is None:
        db.session.rollback()
        tried.wrong(throttle.code_kind(code))
        errors = {"code": "That code is not right, or it was used already: type the one "
                          "your app shows now, or a recovery code."}
        return render_template("auth/code.html", errors=errors, **_second_steps(user)), 401
    response = _signed_in(user, address, tried.device_id, pending.get("next", ""),
                          pending.get("zone", ""), f"password + {how}")
    if how == "recovery code":  # after the new session began: it carries the message
        flash(f"Signed in with a recovery code: {totp.recovery_codes_left(user)} left. "
              "Make new ones under Settings if you are running out.", "info")
    return response


def _second_steps(user: User) -> dict:
    """Say which second steps the user has: a code from the app, a passkey, or both."""
    return {"totp_on": totp.is_on(user), "passkey_on": passkeys.has_any(user)}


def _adopt_browser_zone(user: User, zone: str) -> None:
    """Give a user who has not chosen a time zone the one their browser reports."""
    if not user.timezone and is_zone(zone.strip()):
        user.timezone = zone.strip()
        db.session.commit()


@bp.post("/logout")
@login_required
def logout():
    """Sign out: end this session on the server, so no copy of the cookie works again."""
    sessions.end_session(current_user.session_secret)
    logout_user()
    session.clear()
    flash("Signed out.", "info")
    return redirect(url_for("auth.login"), code=303)


def _settings_page(status: int = 200, headers: dict | None = None, **context):
    context.setdefault("form", {"timezone": current_user.timezone})
    context.setdefault("errors", {})
    context.setdefault("token_form", {"label": "", "days": "90"})
    page = render_template(
        "auth/settings.html", zones=sorted(zone_names()),
        sessions=sessions.list_sessions(current_user), tokens=list_tokens(current_user),
        devices=devices.listed(current_user),
        this_session=getattr(current_user, "session_id", None),
        end_session_url=lambda s: url_for("auth.end_own_session", session_id=s.id),
        revoke_token_url=lambda t: url_for("auth.revoke_api_token", token_id=t.id), **context)
    # a page that shows a new token must not be kept by the browser or a proxy
    return page, status, {"Cache-Control": "no-store", **(headers or {})}


@bp.route("/settings", methods=["GET", "POST"])
@login_required
def settings():
    """Change one's own time zone and password."""
    if request.method != "POST":
        return _settings_page()
    form = {"timezone": request.form.get("timezone", "").strip()}
    finishing = current_user.must_change_password
    errors, wait = _save_settings(form["timezone"], request.form)
    if wait:  # the current password unchecked: what was typed stays, but the passwords
        return _settings_page(429, throttle.retry_after(wait), form=form, errors=errors)
    if errors:
        return _settings_page(422, form=form, errors=errors)
    if finishing:  # the account is set up: on to the work, not the settings page
        flash("Your password is set: welcome to Soloist.", "success")
        return redirect(url_for("dashboard.index"), code=303)
    flash("Settings saved.", "success")
    return redirect(url_for("auth.settings"), code=303)


def _save_settings(zone: str, data) -> tuple[dict[str, str], int]:
    """Save the settings; return why not (field: message) and the seconds a throttled
    current password must wait."""
    errors, wait = {}, 0
    if not is_zone(zone):
        errors["timezone"] = "Unknown time zone; pick one from the list (e.g. Europe/Paris)."
    new = data.get("new_password", "")
    if new or current_user.must_change_password:
        found, wait = _check_password_change(new, data)
        errors.update(found)
    if errors:
        return errors, wait
    set_timezone(current_user, zone)
    if new:
        change_password(current_user, new, keep=current_user.session_secret)
    return {}, 0


def _check_password_change(new: str, data) -> tuple[dict[str, str], int]:
    """Check the current password (under the sign-in limits) and the new one."""
    if current_user.must_change_password:
        # this session began with the one-time password a moment ago: asking for it again
        # proves nothing, and the person has just been told to forget it
        return password_errors(new, data.get("confirm_password", "")), 0
    tried = throttle.attempt("password change", current_user.email, client_address(),
                             current_user)
    wait = tried.wait("password")
    if wait:
        return {"current_password": "Too many wrong passwords. Try again in "
                                    f"{throttle.wait_message(wait)}."}, wait
    if not current_user.check_password(data.get("current_password", "")):
        # the same limit as sign-in: a stolen session cannot guess the password
        tried.wrong("password")
        return {"current_password": "That is not your current password."}, 0
    tried.passed("password")
    return password_errors(new, data.get("confirm_password", "")), 0


@bp.post("/settings/tokens")
@login_required
@stepup.step_up
def create_api_token():
    """Create an API token for oneself and show it, once (a new way in: a fresh proof
    first); one for dangerous actions only when the box says so."""
    form: dict[str, Any] = {"label": request.form.get("label", "").strip(),
                            "days": request.form.get("days", ""),
                            "dangerous_actions": bool(request.form.get("dangerous_actions"))}
    errors = {}
    if not form["label"] or len(form["label"]) > 100:
        errors["label"] = "Name the token (up to 100 characters), e.g. “deploy script”."
    if form["days"] not in TOKEN_DAYS:
        errors["days"] = "Pick when the token expires."
    if errors:
        return _settings_page(422, token_form=form, token_errors=errors)
    token = create_token(current_user, form["label"], TOKEN_DAYS[form["days"]],
                         form["dangerous_actions"])
    return _settings_page(201, new_token=token, new_token_dangerous=form["dangerous_actions"])


@bp.post("/settings/tokens/<int:token_id>/revoke")
@login_required
def revoke_api_token(token_id: int):
    """Revoke one of one's own tokens."""
    _end_own(token_id=token_id, done="Token revoked.")
    return redirect(url_for("auth.settings"), code=303)


@bp.post("/settings/sessions/<int:session_id>/end")
@login_required
def end_own_session(session_id: int):
    """Sign out one of one's other sessions (another browser or device)."""
    if session_id == getattr(current_user, "session_id", None):
        abort(409, "Use Sign out to end the session you are using.")
    _end_own(session_id=session_id, done="That session is signed out.")
    return redirect(url_for("auth.settings"), code=303)


def _end_own(done: str, **which: int) -> None:
    if not end_one(current_user, why=sessions.ENDED_BY_USER, **which):
        abort(404)
    flash(done, "success")
