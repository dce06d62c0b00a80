"""Extension objects, created unbound and initialised in create_app."""

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    """Declarative base for Soloist's typed models."""


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
