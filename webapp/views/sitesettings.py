"""The public site's name and description (admins)."""

from flask import Blueprint, flash, redirect, render_template, request, url_for

from ..accounts.security import role_required
from ..site import state

bp = Blueprint("site_settings", __name__, url_prefix="/admin/site")


def _page(form: dict, errors: dict | None = None, status: int = 200):
    return render_template("site_settings/edit.html", site=state.current(), form=form,
                           errors=errors or {}, fallback_summary=state.fallback_summary), status


@bp.get("/")
@role_required("admin")
def edit():
    """Show the site's name and description, with the defaults a blank field falls back to."""
    site = state.current()
    return _page({"name": site.custom_name or "", "description": site.custom_description or ""})


@bp.post("/")
@role_required("admin")
def save():
    """Save the name and description; every public page validates against the change at once."""
    form = {name: request.form.get(name, "") for name in ("name", "description")}
    try:
        state.save_settings(form["name"], form["description"])
    except state.SiteSettingsError as exc:
        return _page(form, exc.errors, 422)
    flash("Site settings saved: the public pages show them now.", "success")
    return redirect(url_for("site_settings.edit"), code=303)
