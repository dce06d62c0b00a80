"""Serve the JSON API under /api: bearer tokens only, JSON in and out, JSON errors."""

# the route modules add their endpoints to bp; bp lives in its own module so that they
# import it from there and nothing here is imported back
from . import (  # noqa: F401
    audit,
    autosaves,
    contract,
    leaders,
    media,
    plugins,
    posts,
    releases,
    review,
    revisions,
)
from .blueprint import bp

__all__ = ["bp"]
