"""Bound what one address may ask for before it has proved anything: API tokens that do
not match, and anonymous passkey challenges (each one a row until it expires).

Each kind allows so many requests per address over a window (API_TOKEN_FAILURES_PER_ADDRESS
in 15 minutes, PASSKEY_CHALLENGES_PER_ADDRESS in 5). Past that, the request is
answered at once with 429 and Retry-After (the time until the oldest counted request
leaves the window) and nothing is written: the rows an address can make are bounded as
well as its requests. The address is the client's, an IPv6 client's /64, as for the
sign-in limits (webapp.accounts.throttle). Rows older than their window are deleted as
new ones are written.
"""

import math
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa
from flask import current_app

from ..extensions import db
from ..models import RateLimitHit, utcnow


@dataclass(frozen=True)
class Limit:
    """At most as many requests of a kind per address over window as the setting says."""

    setting: str
    window: timedelta

    def allowed(self) -> int:
        """Return how many requests the app's setting allows in the window."""
        return current_app.config[self.setting]


LIMITS = {
    # failed: unknown, revoked or expired
    "api-token": Limit("API_TOKEN_FAILURES_PER_ADDRESS", timedelta(minutes=15)),
    # a challenge lives 5 minutes (webapp.accounts.passkeys.CHALLENGE_SECONDS)
    "passkey-options": Limit("PASSKEY_CHALLENGES_PER_ADDRESS", timedelta(minutes=5)),
}


def wait_seconds(kind: str, address: str) -> int:
    """Return how long address must wait before another request of kind (0: go ahead)."""
    limit, now = LIMITS[kind], utcnow()
    count, oldest = db.session.execute(
        sa.select(sa.func.count(), sa.func.min(RateLimitHit.at))
        .where(RateLimitHit.kind == kind, RateLimitHit.address == address,
               RateLimitHit.at >= now - limit.window)).one()
    if count < limit.allowed():
        return 0
    return max(1, math.ceil((oldest + limit.window - now).total_seconds()))


def record(kind: str, address: str) -> None:
    """Count one request of kind against address (and forget the ones past the window)."""
    now = utcnow()
    db.session.execute(sa.delete(RateLimitHit).where(
        RateLimitHit.kind == kind, RateLimitHit.at < now - LIMITS[kind].window))
    db.session.add(RateLimitHit(kind=kind, address=address[:64], at=now))
    db.session.commit()
