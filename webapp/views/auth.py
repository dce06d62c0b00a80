"""Sign in, sign out, and the signed-in user's own settings."""

from flask import Blueprint, flash, redirect, render_template, request, session, url_for
from flask_login import current_user, login_required, login_user, logout_user

from ..extensions import db
from ..models import User
from ..security import (
    clear_failures,
    client_address,
    find_user,
    is_safe_next,
    record_failure,
    too_many_failures,
)
from ..timezones import is_zone, zone_names

bp = Blueprint("auth", __name__)

MIN_PASSWORD = 10


@bp.route("/login", methods=["GET", "POST"])
def login():
    """Show the sign-in form; sign in on POST."""
    next_url = request.values.get("next", "")
    if current_user.is_authenticated:
        return redirect(next_url if is_safe_next(next_url) else url_for("dashboard.index"))
    if request.method != "POST":  # GET or HEAD: never a write
        return render_template("auth/login.html", email="", next=next_url)
    email = request.form.get("email", "").strip().lower()
    password = request.form.get("password", "")
    address = client_address()
    if too_many_failures(email, address):
        flash("Too many failed sign-ins. Wait 15 minutes and try again.", "error")
        return render_template("auth/login.html", email=email, next=next_url), 429
    user = find_user(email)
    if user is None or not user.active or not user.check_password(password):
        record_failure(email, address)  # counted, never slept on: no request thread waits
        flash("Wrong email or password.", "error")
        return render_template("auth/login.html", email=email, next=next_url), 401
    clear_failures(email)
    _adopt_browser_zone(user, request.form.get("zone", ""))
    session.clear()  # a fresh session at sign-in (no fixation)
    login_user(user)
    if user.must_change_password:
        flash("Choose a new password to finish setting up your account.", "info")
        return redirect(url_for("auth.settings"))
    return redirect(next_url if is_safe_next(next_url) else url_for("dashboard.index"))


def _adopt_browser_zone(user: User, zone: str) -> None:
    """Give a user who has not chosen a time zone the one their browser reports."""
    if not user.timezone and is_zone(zone.strip()):
        user.timezone = zone.strip()
        db.session.commit()


@bp.post("/logout")
@login_required
def logout():
    """Sign out."""
    logout_user()
    session.clear()
    flash("Signed out.", "info")
    return redirect(url_for("auth.login"), code=303)


@bp.route("/settings", methods=["GET", "POST"])
@login_required
def settings():
    """Change one's own time zone and password."""
    errors: dict[str, str] = {}
    form = {"timezone": current_user.timezone}
    if request.method == "POST":
        form = {"timezone": request.form.get("timezone", "").strip()}
        errors = _save_settings(form["timezone"], request.form)
        if not errors:
            flash("Settings saved.", "success")
            return redirect(url_for("auth.settings"), code=303)
    return render_template("auth/settings.html", form=form, errors=errors,
                           zones=sorted(zone_names())), 422 if errors else 200


def _save_settings(zone: str, data) -> dict[str, str]:
    errors = {}
    if not is_zone(zone):
        errors["timezone"] = "Unknown time zone; pick one from the list (e.g. Europe/Paris)."
    new = data.get("new_password", "")
    if new or current_user.must_change_password:
        if too_many_failures(current_user.email, client_address()):
            errors["current_password"] = ("Too many wrong passwords. Wait 15 minutes and "
                                          "try again.")
        elif not current_user.check_password(data.get("current_password", "")):
            # the same limit as sign-in: a stolen session cannot guess the password
            record_failure(current_user.email, client_address())
            errors["current_password"] = "That is not your current password."
        elif len(new) < MIN_PASSWORD:
            errors["new_password"] = f"Use at least {MIN_PASSWORD} characters."
        elif new != data.get("confirm_password", ""):
            errors["confirm_password"] = "The two passwords differ."
    if errors:
        return errors
    current_user.timezone = zone
    if new:
        current_user.set_password(new)
        current_user.must_change_password = False
        current_user.session_version += 1  # sign out every other session
    db.session.commit()
    if new:
        login_user(current_user)
    return {}
