"""User admin (admins only): invite with a one-time password, change roles, deactivate."""

from flask import Blueprint, abort, flash, redirect, render_template, request, session, url_for

from ..models import User
from ..security import (
    AccountError,
    change_role,
    create_account,
    get_user,
    list_users,
    reset_password,
    role_required,
    set_active,
)

bp = Blueprint("users", __name__, url_prefix="/admin/users")

ONE_TIME = "one_time_password"  # session key: shown on the next page view, then dropped


def _page(status: int = 200, **context):
    users = list_users()
    context.setdefault("form", {"email": "", "role": "editor"})
    context.setdefault("errors", {})
    return render_template("users/index.html", users=users, roles=User.ROLES,
                           one_time=session.pop(ONE_TIME, None), **context), status


def _user_or_404(user_id: int) -> User:
    user = get_user(user_id)
    if user is None:
        abort(404)
    return user


def _hand_over(user: User, password: str, what: str) -> None:
    session[ONE_TIME] = {"email": user.email, "password": password, "what": what}


@bp.get("/")
@role_required("admin")
def index():
    """List users, with the form to invite one."""
    return _page()


@bp.post("/")
@role_required("admin")
def create():
    """Create a user with a one-time password, shown once on the next page."""
    form = {"email": request.form.get("email", ""), "role": request.form.get("role", "")}
    try:
        user, password = create_account(form["email"], form["role"])
    except AccountError as exc:
        return _page(422, form=form, errors=exc.errors)
    _hand_over(user, password, "created")
    return redirect(url_for("users.index"), code=303)


@bp.post("/<int:user_id>/role")
@role_required("admin")
def role(user_id: int):
    """Change a user's role."""
    return _change(user_id, lambda user: change_role(user, request.form.get("role", "")),
                   lambda user: f"{user.email} is now {user.role}.")


@bp.post("/<int:user_id>/deactivate")
@role_required("admin")
def deactivate(user_id: int):
    """Deactivate a user: they are signed out and cannot sign in."""
    return _change(user_id, lambda user: set_active(user, False),
                   lambda user: f"{user.email} is deactivated and signed out.")


@bp.post("/<int:user_id>/activate")
@role_required("admin")
def activate(user_id: int):
    """Let a deactivated user sign in again."""
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


@bp.post("/<int:user_id>/reset-password")
@role_required("admin")
def reset(user_id: int):
    """Give a user a new one-time password (ending their sessions)."""
    user = _user_or_404(user_id)
    _hand_over(user, reset_password(user), "reset")
    return redirect(url_for("users.index"), code=303)
