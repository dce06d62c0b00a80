"""Slow password guessing down without letting anyone lock a user out.

Failed sign-ins are counted per address (an IPv6 /64 counts as one) and per account
over a 15-minute window. Past a few free tries, each further try must wait twice as
long as the one before, capped: the answer is an immediate 429 with Retry-After, so
no request thread is held. The per-account delay applies only to addresses the
account has not signed in from lately: a stranger guessing from elsewhere slows
strangers down, while the owner signs in from their usual address as always (their
own mistakes still count against that address).
"""

import ipaddress
import math
from datetime import timedelta

import sqlalchemy as sa

from ..extensions import db
from ..models import LoginFailure, utcnow
from .sessions import is_known_address

WINDOW = timedelta(minutes=15)
FREE_PER_ADDRESS = 10  # across every account, from one address
FREE_PER_ACCOUNT = 5  # on one account, from addresses it has not signed in from
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


FREE_PER_DEVICE = 5  # on one account, from one browser that signed in to it before


def wait_seconds(email: str, address: str, device_id: int | None = None) -> int:
    """Return how many seconds this sign-in must wait before a try (0: try now).

    device_id names the trusted browser the request came from (its device cookie, valid for
    this account): then only that browser's own failures count, wherever it is.
    """
    now = utcnow()
    since = now - WINDOW
    if device_id is not None:
        return _wait(LoginFailure.device_id == device_id, since, now, FREE_PER_DEVICE)
    wait = _wait(LoginFailure.address == address, since, now, FREE_PER_ADDRESS)
    if is_known_address(email, address):
        # the owner's own address: only the failures from here count against the account
        mine = sa.and_(LoginFailure.email == email, LoginFailure.address == address)
        return max(wait, _wait(mine, since, now, FREE_PER_ACCOUNT))
    return max(wait, _wait(LoginFailure.email == email, since, now, FREE_PER_ACCOUNT))


def _wait(where, since, now, free: int) -> int:
    count, last = db.session.execute(
        sa.select(sa.func.count(), sa.func.max(LoginFailure.at))
        .where(where, LoginFailure.at >= since)).one()
    if count < free:
        return 0
    delay = timedelta(seconds=min(2 ** (count - free), MAX_DELAY_SECONDS))
    return max(0, math.ceil((last + delay - now).total_seconds()))


def record_failure(email: str, address: str, device_id: int | None = None) -> None:
    """Remember one failed sign-in (and the trusted browser it came from, if any)."""
    db.session.add(LoginFailure(email=email[:254], address=address, device_id=device_id))
    db.session.commit()


def clear_failures(email: str, address: str, device_id: int | None = None) -> None:
    """Forget the failures on an account from the address (and the browser) that just
    signed in to it.

    A stranger's failures from elsewhere stay: the account stays slow for them.
    """
    mine = sa.and_(LoginFailure.email == email, LoginFailure.address == address)
    if device_id is not None:
        mine = sa.or_(mine, LoginFailure.device_id == device_id)
    db.session.execute(sa.delete(LoginFailure).where(mine))
    db.session.commit()


def wait_message(seconds: int) -> str:
    """Say how long to wait, in words."""
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"
