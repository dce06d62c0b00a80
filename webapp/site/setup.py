"""How far a new install is set up: the admin dashboard's first steps."""

import sqlalchemy as sa
from flask import current_app

from ..extensions import db
from ..models import User, WebhookEndpoint
from . import state as site_state


def progress() -> dict[str, bool]:
    """Return which first steps are done: the site named, someone invited, a webhook added."""
    named = bool(site_state.current().custom_name) or current_app.config["SITE_NAME"] != "Soloist"
    people = db.session.scalar(sa.select(sa.func.count()).select_from(User)) or 0
    hooks = db.session.scalar(sa.select(sa.func.count()).select_from(WebhookEndpoint)) or 0
    return {"named": named, "invited": people > 1, "hooked": hooks > 0}
