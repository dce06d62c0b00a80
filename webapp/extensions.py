"""Extension objects, created unbound and initialised in create_app."""

from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import Flask
from flask_login import LoginManager
from flask_sqlalchemy import SQLAlchemy
from flask_sqlalchemy.session import Session as AppSession
from flask_wtf.csrf import CSRFProtect
from sqlalchemy.orm import DeclarativeBase

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


class Base(DeclarativeBase):
    """Declarative base for Soloist's typed models."""


class Session(AppSession):
    """db.session. One opened on an engine of its own keeps to it (the scheduler's work:
    webapp.scheduling.engines), where Flask-SQLAlchemy's would take the app's engine."""

    def get_bind(self, mapper: Any = None, clause: Any = None, bind: Any = None,
                 **kwargs: Any) -> Any:
        if bind is None and self.bind is not None:
            return self.bind
        return super().get_bind(mapper=mapper, clause=clause, bind=bind, **kwargs)


db = SQLAlchemy(model_class=Base, session_options={"class_": Session})
if TYPE_CHECKING:  # db.Model is made from Base at run time, where no checker reads it
    Model = Base
else:
    Model = db.Model
login_manager = LoginManager()
csrf = CSRFProtect()


def bind_migrations(app: Flask) -> None:
    """Give app Flask-Migrate (app.extensions["migrate"]) now, if it has none yet.

    Flask-Migrate brings Alembic and Mako: 0.1 s of CPU at import, which every gunicorn
    master, respawned worker and flask command paid while only a migration uses them. They
    are imported here, by `flask db …`, the release command and the tests' migrate().
    """
    if "migrate" not in app.extensions:
        from flask_migrate import Migrate

        Migrate(app, db, directory=str(MIGRATIONS), render_as_batch=True)
