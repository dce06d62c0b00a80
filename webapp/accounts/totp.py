"""TOTP two-factor sign-in (RFC 6238, with pyotp): enrol, check a code, recovery codes.

The secret is stored encrypted (Fernet) with a key derived from SECRET_KEY; after a key
rotation, SECRET_KEY_FALLBACKS (the old keys, Flask's own setting) still decrypt it, and
the next successful code re-encrypts it with the new key. Enrolment stores the secret
pending: two-factor is on only once a code typed from the app matches. A code is accepted
in its 30-second step or the one either side (clocks drift), once: a step used is never
accepted again. Ten single-use recovery codes stand in for a lost phone; only their
SHA-256 is kept, and they are shown once.
"""

import base64
import hashlib
import hmac
import io
import secrets
import time

import pyotp
import segno
import sqlalchemy as sa
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from flask import current_app
from sqlalchemy.orm.attributes import set_committed_value

from ..db import rows_changed
from ..extensions import db
from ..models import RecoveryCode, User, utcnow

STEP = 30  # seconds a code lasts
RECOVERY_CODES = 10
RECOVERY_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i


def _fernet() -> MultiFernet:
    keys = [current_app.config["SECRET_KEY"],
            *current_app.config["SECRET_KEY_FALLBACKS"]]
    return MultiFernet([Fernet(base64.urlsafe_b64encode(hashlib.sha256(
        b"soloist totp secret\0" + str(key).encode()).digest())) for key in keys if key])


def is_on(user: User) -> bool:
    return user.totp_on_at is not None and bool(user.totp_secret)


def _secret(user: User) -> str | None:
    if not user.totp_secret:
        return None
    try:
        return _fernet().decrypt(user.totp_secret.encode()).decode()
    except InvalidToken:  # encrypted with a key that is gone: two-factor must be reset
        return None


def start(user: User) -> str:
    """Store a new pending secret for user and return it (two-factor stays as it was until
    a code confirms it, for an enrolment that replaces one)."""
    secret = pyotp.random_base32()
    user.totp_secret = _fernet().encrypt(secret.encode()).decode()
    user.totp_on_at = None
    user.totp_last_step = 0
    db.session.commit()
    return secret


def pending_secret(user: User) -> str | None:
    """Return the secret being enrolled (None when two-factor is on or never started)."""
    return None if is_on(user) else _secret(user)


def provisioning_uri(user: User, secret: str) -> str:
    name = current_app.config["SITE_NAME"]
    return pyotp.TOTP(secret).provisioning_uri(name=user.email, issuer_name=name)


def qr_svg(uri: str) -> bytes:
    """Return the QR code of uri as an SVG image (no script, no style: fine under the CSP)."""
    out = io.BytesIO()
    segno.make(uri, error="m").save(out, kind="svg", scale=5, border=2, xmldecl=False,
                                    dark="#111", light="#fff")
    return out.getvalue()


def _matching_step(secret: str, code: str, after: int) -> int | None:
    """Return the time step code belongs to (now, or one either side), if later than after."""
    code = "".join(code.split())
    if not (code.isascii() and code.isdigit() and len(code) == 6):
        return None
    totp, now = pyotp.TOTP(secret), int(time.time()) // STEP
    for step in (now - 1, now, now + 1):
        if step > after and hmac.compare_digest(totp.at(step * STEP), code):
            return step
    return None


def confirm(user: User, code: str) -> list[str] | None:
    """Switch two-factor on if code matches the pending secret; return the recovery codes
    (shown once), or None when the code is wrong."""
    secret = pending_secret(user)
    step = _matching_step(secret, code, 0) if secret else None
    if step is None:
        return None
    user.totp_on_at, user.totp_last_step = utcnow(), step
    codes = _new_recovery_codes(user)
    db.session.commit()
    return codes


def check(user: User, code: str) -> str | None:
    """Return how code proved the second factor ("totp" or "recovery code"), or None.

    A TOTP code's step is remembered so it is never accepted twice, and a recovery code is
    used up, each by a conditional write that only one request can make. The caller
    commits (with the sign-in).
    """
    secret = _secret(user) if is_on(user) else None
    if secret is None:
        return None
    step = _matching_step(secret, code, user.totp_last_step)
    if step is not None:
        return "totp" if _spend(user, secret, step) else None
    typed = "".join(code.lower().split()).replace("-", "")
    used = rows_changed(
        sa.update(RecoveryCode).where(RecoveryCode.user_id == user.id,
                                      RecoveryCode.code_hash == _hash(typed),
                                      RecoveryCode.used_at.is_(None))
        .values(used_at=utcnow()))
    return "recovery code" if used else None


def _spend(user: User, secret: str, step: int) -> bool:
    """Use step up for user, once: a conditional UPDATE, so that of two requests bearing
    one code only the first to write wins (the other waits for the row, then finds the step
    used). The secret is re-encrypted with the current key on the way."""
    stored = _fernet().encrypt(secret.encode()).decode()
    spent = rows_changed(
        sa.update(User).where(User.id == user.id, User.totp_last_step < step)
        .values(totp_last_step=step, totp_secret=stored)
        .execution_options(synchronize_session=False))
    if spent:
        set_committed_value(user, "totp_last_step", step)
        set_committed_value(user, "totp_secret", stored)
    return spent == 1


def recovery_codes_left(user: User) -> int:
    return db.session.scalar(sa.select(sa.func.count()).select_from(RecoveryCode).where(
        RecoveryCode.user_id == user.id, RecoveryCode.used_at.is_(None))) or 0


def regenerate(user: User) -> list[str]:
    """Replace the user's recovery codes with ten new ones (shown once)."""
    codes = _new_recovery_codes(user)
    db.session.commit()
    return codes


def turn_off(user: User) -> None:
    """Switch two-factor off and forget its secret and recovery codes; the caller commits."""
    user.totp_secret, user.totp_on_at, user.totp_last_step = None, None, 0
    db.session.execute(sa.delete(RecoveryCode).where(RecoveryCode.user_id == user.id))


def _new_recovery_codes(user: User) -> list[str]:
    db.session.execute(sa.delete(RecoveryCode).where(RecoveryCode.user_id == user.id))
    codes = ["".join(secrets.choice(RECOVERY_ALPHABET) for _ in range(10))
             for _ in range(RECOVERY_CODES)]
    db.session.add_all(RecoveryCode(user_id=user.id, code_hash=_hash(c)) for c in codes)
    return [f"{c[:5]}-{c[5:]}" for c in codes]


def _hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def required_for(user: User) -> bool:
    """Return whether the account policy says user must sign in with a second factor."""
    rule = policy_rule()
    return rule == "everyone" or (rule == "admins" and user.role == "admin")


def set_policy(rule: str) -> None:
    """Say who must use a second factor; the caller audits and commits."""
    from ..models import AccountPolicy

    if rule not in AccountPolicy.TWO_FACTOR:
        raise ValueError(rule)
    policy = db.session.get(AccountPolicy, AccountPolicy.ROW)
    if policy is None:
        policy = AccountPolicy(id=AccountPolicy.ROW)
        db.session.add(policy)
    policy.two_factor_required = rule


def policy_rule() -> str:
    from ..models import AccountPolicy

    policy = db.session.get(AccountPolicy, AccountPolicy.ROW)
    return policy.two_factor_required if policy else "nobody"
