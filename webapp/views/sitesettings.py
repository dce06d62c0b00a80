"""The public site's name, description, time zone and language, and whether editors'
posts need review (admins)."""

from flask import Blueprint, flash, redirect, render_template, request, url_for

from .. import posts
from ..accounts.security import role_required
from ..site import state
from ..timezones import zone_names

bp = Blueprint("site_settings", __name__, url_prefix="/admin/site")
FIELDS = ("name", "description", "timezone", "language")


def _page(form: dict, errors: dict | None = None, status: int = 200):
    return render_template("site_settings/edit.html", site=state.current(), form=form,
                           errors=errors or {}, fallback_summary=state.fallback_summary,
                           zones=sorted(zone_names()),
                           require_review=posts.gate.review_required()), status


@bp.get("/")
@role_required("admin")
def edit():
    """Show the site's settings, with the defaults a blank field falls back to."""
    site = state.current()
    return _page({"name": site.custom_name or "", "description": site.custom_description or "",
                  "timezone": site.custom_timezone or "", "language": site.custom_language or ""})


@bp.post("/")
@role_required("admin")
def save():
    """Save the settings; every public page validates against the change at once."""
    form = {name: request.form.get(name, "") for name in FIELDS}
    try:
        state.save_settings(**form)
    except state.SiteSettingsError as exc:
        return _page(form, exc.errors, 422)
    flash("Site settings saved: the public pages show them now.", "success")
    return redirect(url_for("site_settings.edit"), code=303)


@bp.post("/review")
@role_required("admin")
def review():
    """Turn "Require review" on or off: editors' posts then need another reviewer too."""
    on = request.form.get("require_review") == "1"
    posts.review.set_required(on)
    flash("Review is required for editors' posts now: another editor or an admin approves "
          "them." if on else "Editors publish their own posts again; contributors' posts "
          "still need a reviewer.", "success")
    return redirect(url_for("site_settings.edit"), code=303)
