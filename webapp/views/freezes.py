"""Freeze and resume publishing or timers (admins), and the banner everyone sees."""

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_login import current_user

from .. import posts
from ..accounts.security import role_required
from ..accounts.stepup import step_up
from ..ops import freezes

bp = Blueprint("freezes", __name__, url_prefix="/admin/freeze")


@bp.app_context_processor
def _banner() -> dict:
    # a callable: only the pages that show the banner (dashboard, status) read the table
    return {"active_freezes": lambda: list(freezes.active().values()),
            "freeze_scopes": freezes.SCOPES, "freeze_on_resume": freezes.ON_RESUME}


def _page(status: int = 200, **context):
    context.setdefault("form", {})
    context.setdefault("errors", {})
    return render_template("freezes/index.html", frozen=freezes.active(),
                           scopes=freezes.SCOPES, on_resume=freezes.ON_RESUME,
                           **context), status


@bp.get("/")
@role_required("admin")
def index():
    """Show what is frozen, with the forms to freeze or resume each scope."""
    return _page()


@bp.post("/")
@role_required("admin")
@step_up
def create():
    """Freeze a scope with a reason."""
    form = {name: request.form.get(name, "") for name in ("scope", "reason", "on_resume")}
    try:
        freezes.freeze(form["scope"], form["reason"], form["on_resume"], current_user.email)
    except freezes.FreezeError as exc:
        return _page(422 if "form" not in exc.errors else 409, form=form, errors=exc.errors)
    flash(f"{freezes.SCOPES[form['scope']]} is paused across the fleet.", "warning")
    return redirect(url_for("status.index"), code=303)


@bp.post("/<scope>/resume")
@role_required("admin")
@step_up
def resume(scope: str):
    """End a scope's freeze."""
    try:
        done = freezes.resume(scope, posts.hold_due, came_due=posts.came_due,
                              hold_releases=posts.releases.hold_due,
                              releases_due=posts.releases.came_due)
    except freezes.FreezeError as exc:
        return _page(409, errors=exc.errors)
    message = f"{freezes.SCOPES[scope]} resumed."
    if done.held:
        count = ("1 post that came due meanwhile is a draft again, its time kept"
                 if len(done.held) == 1 else f"{len(done.held)} posts that came due meanwhile "
                 "are drafts again, their times kept")
        message += f" {count}, for an editor to schedule or publish: {_titles(done.held)}."
    elif done.released:
        count = ("1 post that came due meanwhile goes out now" if len(done.released) == 1
                 else f"{len(done.released)} posts that came due meanwhile go out now")
        message += f" {count}: {_titles(done.released)}."
    elif scope == "publishing":
        message += " No post came due meanwhile."
    if done.released_releases:
        message += f" Going out now too: release {_titles(done.released_releases)}."
    if done.held_releases:
        message += (f" Held until an editor gives it a new time: release "
                    f"{_titles(done.held_releases)}.")
    flash(message, "success")
    return redirect(url_for("status.index"), code=303)


def _titles(posts_named: list[tuple[int, str]], shown: int = 5) -> str:
    """Name the first posts by title, and count the rest."""
    titles = ", ".join(f"“{title}”" for _, title in posts_named[:shown])
    rest = len(posts_named) - shown
    return titles + (f" and {rest} more" if rest > 0 else "")
