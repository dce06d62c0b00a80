"""User admin (admins only): invite, change roles, deactivate, see and end access."""

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from ..accounts import devices, sessions, totp
from ..accounts.security import role_required
from ..accounts.stepup import step_up
from ..accounts.tokens import list_tokens
from ..accounts.users import (
    AccountError,
    change_role,
    create_account,
    end_access,
    end_one,
    get_user,
    list_users,
    reset_password,
    set_active,
    sign_out_everywhere,
    user_target,
)
from ..extensions import db
from ..models import User
from ..ops import audit

bp = Blueprint("users", __name__, url_prefix="/admin/users")


def _page(status: int = 200, **context):
    context.setdefault("form", {"email": "", "role": "editor"})
    context.setdefault("errors", {})
    page = render_template("users/index.html", users=list_users(), roles=User.ROLES,
                           policy=totp.policy_rule(), policy_words=POLICY_WORDS, **context)
    # a one-time password is shown in this answer only: never kept in a cookie or a cache
    return page, status, {"Cache-Control": "no-store"}


def _user_or_404(user_id: int) -> User:
    user = get_user(user_id)
    if user is None:
        abort(404)
    return user


@bp.get("/")
@role_required("admin")
def index():
    """List users, with the form to invite one."""
    return _page()


@bp.post("/")
@role_required("admin")
@step_up
def create():
    """Create a user with a one-time password, shown once in this answer (a new way in:
    a fresh proof first)."""
    form = {"email": request.form.get("email", ""), "role": request.form.get("role", "")}
    try:
        user, password = create_account(form["email"], form["role"])
    except AccountError as exc:
        return _page(422, form=form, errors=exc.errors)
    return _page(201, one_time={"email": user.email, "password": password, "what": "created"})


@bp.post("/<int:user_id>/reset-password")
@role_required("admin")
@step_up
def reset(user_id: int):
    """Give a user a new one-time password (ending their sessions and tokens)."""
    user = _user_or_404(user_id)
    password = reset_password(user)
    return _page(one_time={"email": user.email, "password": password, "what": "reset"})


@bp.post("/<int:user_id>/role")
@role_required("admin")
@step_up
def role(user_id: int):
    """Change a user's role."""
    return _change(user_id, lambda user: change_role(user, request.form.get("role", "")),
                   lambda user: f"{user.email} is now {user.role}.")


@bp.post("/<int:user_id>/deactivate")
@role_required("admin")
@step_up
def deactivate(user_id: int):
    """Deactivate a user: their sessions and tokens end, and they cannot sign in."""
    return _change(user_id, lambda user: set_active(user, False),
                   lambda user: f"{user.email} is deactivated, signed out, and their API "
                                "tokens are revoked.")


@bp.post("/<int:user_id>/activate")
@role_required("admin")
@step_up
def activate(user_id: int):
    """Let a deactivated user sign in again (their old tokens stay revoked)."""
    return _change(user_id, lambda user: set_active(user, True),
                   lambda user: f"{user.email} can sign in again.")


def _change(user_id: int, change, done):
    """Apply change to a user; a refused change is shown on the user's row (409)."""
    user = _user_or_404(user_id)
    try:
        change(user)
    except AccountError as exc:
        return _page(409, row_errors={user_id: next(iter(exc.errors.values()))})
    flash(done(user), "success")
    return redirect(url_for("users.index"), code=303)


@bp.get("/<int:user_id>")
@role_required("admin")
def access(user_id: int):
    """Show a user's sessions and API tokens, each with a button to end it."""
    user = _user_or_404(user_id)
    return render_template(
        "users/access.html", user=user, sessions=sessions.list_sessions(user),
        devices=devices.listed(user),
        tokens=list_tokens(user),
        end_session_url=lambda s: url_for("users.end_session", user_id=user.id,
                                          session_id=s.id),
        revoke_token_url=lambda t: url_for("users.revoke_token", user_id=user.id,
                                           token_id=t.id))


@bp.post("/<int:user_id>/sessions/<int:session_id>/end")
@role_required("admin")
def end_session(user_id: int, session_id: int):
    """Sign one of a user's sessions out."""
    return _end(user_id, "Session signed out.", session_id=session_id)


@bp.post("/<int:user_id>/tokens/<int:token_id>/revoke")
@role_required("admin")
def revoke_token(user_id: int, token_id: int):
    """Revoke one of a user's API tokens."""
    return _end(user_id, "Token revoked.", token_id=token_id)


@bp.post("/<int:user_id>/sign-out-everywhere")
@role_required("admin")
@step_up
def everywhere(user_id: int):
    """End every session and revoke every token of a user."""
    user = _user_or_404(user_id)
    sign_out_everywhere(user)
    flash(f"{user.email} is signed out everywhere and their API tokens are revoked.",
          "success")
    return redirect(url_for("users.access", user_id=user.id), code=303)


def _end(user_id: int, done: str, session_id: int | None = None, token_id: int | None = None):
    user = _user_or_404(user_id)
    if not end_one(user, session_id=session_id, token_id=token_id):
        abort(404)
    flash(done, "success")
    return redirect(url_for("users.access", user_id=user.id), code=303)


POLICY_WORDS = {"nobody": "Nobody has to", "admins": "Admins must",
                "everyone": "Everyone must"}


@bp.post("/two-factor-policy")
@role_required("admin")
@step_up
def two_factor_policy():
    """Say who must sign in with a second factor: nobody, admins or everyone."""
    rule = request.form.get("two_factor_required", "")
    if rule not in POLICY_WORDS:
        return _page(422, errors={"two_factor_required": "Pick nobody, admins or everyone."})
    before = totp.policy_rule()
    totp.set_policy(rule)
    audit.record("account.two_factor_policy", "two-factor policy",
                 {"required": audit.changes({"for": before}, {"for": rule}).get("for", rule)})
    db.session.commit()
    flash(f"{POLICY_WORDS[rule]} sign in with a second factor now"
          + (": they are walked through it at their next page." if rule != "nobody" else "."),
          "success")
    return redirect(url_for("users.index"), code=303)


@bp.post("/<int:user_id>/two-factor/reset")
@role_required("admin")
@step_up
def reset_two_factor(user_id: int):
    """Switch a user's two-factor off (a lost phone) and end their sessions and tokens."""
    user = _user_or_404(user_id)
    totp.turn_off(user)
    end_access(user, "two-factor reset")
    audit.record("user.two_factor_reset", user_target(user), {})
    db.session.commit()
    flash(f"{user.email}'s two-factor sign-in is off and their sessions ended: they sign in "
          "with their password and set it up again.", "success")
    return redirect(url_for("users.access", user_id=user.id), code=303)
