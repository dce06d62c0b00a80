"""One throttle for every secret a person types, and the log of each decision.

A password (at sign-in, in settings, at a step-up) and a TOTP or recovery code (sign-in's
second step, a step-up, turning two-factor off, new recovery codes) go through attempt():
wrong ones are counted per address (an IPv6 /64 counts as one) and per account over a
15-minute window; past a few free tries, each further try must wait twice as long as the
one before, capped. The answer is an immediate 429 with Retry-After, so no request thread
is held and no guess is checked. The per-account delay applies only to addresses the
account has not signed in from lately: a stranger guessing from elsewhere slows strangers
down, while the owner signs in from their usual address as always (their own mistakes still
count against that address). A browser with the account's device cookie (devices) has an
allowance of its own that nobody else's failures touch.

Every decision is written to the audit log as auth.ok, auth.wrong, auth.throttled or
auth.refused (which door, which method, which browser; never the secret), and stays there
when a sign-in forgets the failures it counted: a completed sign-in is its session.start.
A run of throttled tries from one address is one auth.throttled row, so a flood of refused
requests writes nothing more.
"""

import ipaddress
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from ..extensions import db
from ..models import AuditEvent, LoginFailure, User, utcnow
from ..ops import audit
from . import devices
from .sessions import is_known_address
from .users import find_user, user_target

WINDOW = timedelta(minutes=15)
FREE_PER_ADDRESS = 10  # across every account, from one address
FREE_PER_ACCOUNT = 5  # on one account, from addresses it has not signed in from
FREE_PER_DEVICE = 5  # on one account, from one browser that signed in to it before
MAX_DELAY_SECONDS = 300


def address_bucket(address: str) -> str:
    """Return what failures are counted against: the address, or its /64 for IPv6."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


@dataclass
class Attempt:
    """One try at a secret: the door (sign-in, second step, step-up, two-factor off,
    recovery codes, password change), the account tried (its user, when it exists), the
    address and the browser's device (its cookie, valid for this account)."""

    door: str
    email: str
    address: str
    user: User | None = None
    device_id: int | None = None

    def wait(self, method: str) -> int:
        """Return how many seconds this try must wait (0: check the secret now); a refusal
        is logged, once for each run of them from one address."""
        seconds, since = _waits(self.email, self.address, self.device_id)
        if seconds and not _throttled_since(since):
            self._log("throttled", method, wait=seconds)
            db.session.commit()
        return seconds

    def wrong(self, method: str) -> None:
        """Count a wrong secret against the account, the browser and the address; log it."""
        db.session.add(LoginFailure(email=self.email[:254], address=self.address,
                                    device_id=self.device_id))
        self._log("wrong", method)
        db.session.commit()

    def passed(self, method: str, **detail: str) -> None:
        """Log a right secret that starts no session (a sign-in's session.start says how)."""
        self._log("ok", method, **detail)
        db.session.commit()

    def refused(self, method: str, reason: str) -> None:
        """Log a proof refused for another reason than a wrong secret (a passkey's answer:
        no user verification, an expired challenge, someone else's key)."""
        self._log("refused", method, reason=reason)
        db.session.commit()

    def _log(self, outcome: str, method: str, **detail) -> None:
        who = self.user or (find_user(self.email) if self.email else None)
        audit.record(f"auth.{outcome}", user_target(who) if who else "",
                     {"for": self.door, "method": method, "device": self.device_id, **detail},
                     actor=who or self.email)


def attempt(door: str, email: str, address: str, user: User | None = None) -> Attempt:
    """Begin a try at door for email's account (user, if known) from address (the bucket
    security.client_address gives); the request's device cookie counts if it is this
    account's."""
    trusted = devices.presented(email) if email else None
    return Attempt(door, email, address, user, trusted.id if trusted else None)


def code_kind(code: str) -> str:
    """Say which code was typed, for the log: six digits are a TOTP code."""
    typed = "".join(code.split())
    return "totp" if typed.isascii() and typed.isdigit() and len(typed) == 6 \
        else "recovery code"


def _waits(email: str, address: str, device_id: int | None) -> tuple[int, datetime | None]:
    """Return the wait, and the last failure it runs from.

    With a device, only that browser's own failures count, wherever it is.
    """
    now = utcnow()
    since = now - WINDOW
    if device_id is not None:
        return _wait(LoginFailure.device_id == device_id, since, now, FREE_PER_DEVICE)
    if is_known_address(email, address):
        # the owner's own address: only the failures from here count against the account
        account = sa.and_(LoginFailure.email == email, LoginFailure.address == address)
    else:
        account = LoginFailure.email == email
    return max(_wait(LoginFailure.address == address, since, now, FREE_PER_ADDRESS),
               _wait(account, since, now, FREE_PER_ACCOUNT), key=lambda found: found[0])


def _wait(where, since, now, free: int) -> tuple[int, datetime | None]:
    count, last = db.session.execute(
        sa.select(sa.func.count(), sa.func.max(LoginFailure.at))
        .where(where, LoginFailure.at >= since)).one()
    if count < free:
        return 0, None
    delay = timedelta(seconds=min(2 ** (count - free), MAX_DELAY_SECONDS))
    return max(0, math.ceil((last + delay - now).total_seconds())), last


def _throttled_since(since: datetime | None) -> bool:
    """Return whether a throttled try from this request's address is logged since since."""
    return since is not None and bool(db.session.scalar(sa.select(sa.exists().where(
        AuditEvent.action == "auth.throttled", AuditEvent.at >= since,
        AuditEvent.address == audit.request_address()))))


def clear_failures(email: str, address: str, device_id: int | None = None) -> None:
    """Forget the failures on an account from the address (and the browser) that just
    signed in to it; the audit log keeps them.

    A stranger's failures from elsewhere stay: the account stays slow for them.
    """
    mine = sa.and_(LoginFailure.email == email, LoginFailure.address == address)
    if device_id is not None:
        mine = sa.or_(mine, LoginFailure.device_id == device_id)
    db.session.execute(sa.delete(LoginFailure).where(mine))
    db.session.commit()


def retry_after(seconds: int) -> dict[str, str]:
    """Return the headers of a throttled answer."""
    return {"Retry-After": str(seconds)}


def wait_message(seconds: int) -> str:
    """Say how long to wait, in words."""
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"
