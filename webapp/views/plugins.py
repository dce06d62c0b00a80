"""Plugins: what is loaded, what is broken and why, switching them on and off; the sitemap."""

from flask import Blueprint, Response, abort, flash, redirect, render_template, url_for

from .. import posts
from ..accounts.security import role_required
from ..plugins import hooks, registry, sitemap
from ..site import httpcache, surrogate

bp = Blueprint("plugins", __name__)


@bp.get("/admin/plugins/")
@role_required("admin")
def index():
    """List loaded plugins (actions, hooks, default timers) and broken ones with their error.

    The admin's page: how plugins are installed and called is the engine room. Editors meet
    plugins through their actions, on the timer form.
    """
    off = registry.disabled_names()
    loaded = sorted(registry.plugins().values(), key=lambda p: p.name)
    return render_template("plugins/index.html", plugins=loaded, off=off,
                           paused=registry.paused_reasons(), hook_health=hooks.health(),
                           broken=sorted(registry.broken().values(), key=lambda b: b.name),
                           source=registry.source)


@bp.post("/admin/plugins/<name>/<any(enable, disable):change>")
@role_required("admin")
def switch(name: str, change: str):
    """Switch a loaded plugin on or off."""
    if name not in registry.plugins():
        abort(404)
    registry.set_enabled(name, change == "enable")
    flash(f"Plugin {name} switched {'on' if change == 'enable' else 'off'}.", "success")
    return redirect(url_for("plugins.index"), code=303)


@bp.get("/sitemap.xml")
def sitemap_xml():
    """Serve the sitemap the sitemap plugin last stored (any instance can).

    Public, under its key, kept no longer than the lists (until any post's next change).
    """
    stored = sitemap.load()
    if stored is None:
        abort(404)
    xml = render_template("plugins/sitemap.xml", entries=stored["entries"],
                          root=url_for("site.index", _external=True).rstrip("/"))
    due = posts.listing()
    keep = httpcache.Keep(surrogate.keys_for("sitemap"), posts.lists_change_at(due),
                          due.db_now)
    return httpcache.kept(Response(xml, mimetype="application/xml"), keep)
