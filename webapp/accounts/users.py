"""Accounts: find and invite users, check passwords, change roles, passwords and state.

Anything that should end a user's access (a password change or reset, deactivation)
ends their sessions and revokes their API tokens in the same step.
"""

import secrets
from functools import cache

import sqlalchemy as sa
from werkzeug.security import generate_password_hash

from ..extensions import db
from ..models import User
from ..models.accounts import password_method
from ..ops import audit
from ..refusals import Refused
from . import devices, sessions, totp
from .emails import EmailError, clean_email, normalise
from .tokens import revoke_tokens

MIN_PASSWORD = 10
MAX_USER_ID = 2**31 - 1  # users.id is an INTEGER: a larger id in a URL names nobody


def find_user(email: str) -> User | None:
    """Return the user with this email (in its one stored spelling), if any."""
    return db.session.scalar(sa.select(User).where(User.email == normalise(email)))


def get_user(user_id: int) -> User | None:
    """Return the user with this id, if any."""
    return db.session.get(User, user_id) if 0 < user_id <= MAX_USER_ID else None


def list_users() -> list[User]:
    """Return every user, by email."""
    return list(db.session.scalars(sa.select(User).order_by(User.email)))


@cache
def _decoy_hash(method: str) -> str:
    return generate_password_hash(secrets.token_urlsafe(16), method)


def check_credentials(email: str, password: str) -> User | None:
    """Return the active user with this email and password, or None.

    The password is hashed whether or not the account exists or is active, so the answer
    takes as long for an unknown email as for a known one.
    """
    user = find_user(email)
    if user is None:
        User(password_hash=_decoy_hash(password_method())).check_password(password)
        return None
    right = user.check_password(password)
    return user if right and user.active else None


class AccountError(Refused):
    """An account change was refused; errors maps a form field (or "form") to why."""


# no look-alikes (0/O, 1/l/I): a one-time password is read off a screen and typed by hand
ONE_TIME_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"


def one_time_password() -> str:
    """Return a random password for an admin to hand over once: four groups of four from
    31 characters that cannot be mistaken for each other (79 bits), e.g. k7mq-x3rt-9wpz-h2fd."""
    groups = ("".join(secrets.choice(ONE_TIME_ALPHABET) for _ in range(4)) for _ in range(4))
    return "-".join(groups)


def create_account(email: str, role: str) -> tuple[User, str]:
    """Create an active user with a one-time password they must change; return both."""
    errors = {}
    try:
        email = clean_email(email)
    except EmailError as exc:
        errors["email"] = str(exc)
    else:
        if db.session.scalar(sa.select(User.id).where(User.email == email)) is not None:
            errors["email"] = "A user with this email exists already."
    if role not in User.ROLES:
        errors["role"] = "Pick admin, editor or viewer."
    if errors:
        raise AccountError(errors)
    password = one_time_password()
    # no time zone yet: the first sign-in takes the browser's
    user = User(email=email, role=role, active=True, timezone="", must_change_password=True)
    user.set_password(password)
    db.session.add(user)
    try:
        db.session.flush()  # the audit row names the new user's id (never the password)
        audit.record("user.invite", user_target(user), {"email": email, "role": role})
        db.session.commit()
    except sa.exc.IntegrityError:
        db.session.rollback()
        raise AccountError({"email": "A user with this email exists already."}) from None
    return user, password


def user_target(user: User) -> str:
    """Name a user in the audit log: user 3 “ada@example.com”."""
    return audit.target("user", user.id, user.email)


def end_access(user: User, why: str, keep: str | None = None) -> None:
    """End every session of user (but the one keep names) and revoke their tokens.

    In the caller's transaction: the change and the end of access commit together.
    """
    sessions.end_sessions(user, why, keep=keep)
    revoke_tokens(user, why)
    devices.revoke_all(user, keep_current=keep is not None)  # its sign-ins' device cookies


def end_one(user: User, *, session_id: int | None = None, token_id: int | None = None,
            why: str = sessions.ENDED_BY_ADMIN) -> int:
    """End one session or revoke one token of user; return how many ended (0 or 1)."""
    if not 0 < (session_id or token_id or 0) <= MAX_USER_ID:
        return 0
    if session_id is not None:
        ended = sessions.end_sessions(user, why, only=session_id)
        what = audit.target("session", session_id, user.email)
    else:
        ended = revoke_tokens(user, why, only=token_id)
        what = audit.target("token", token_id, user.email)
    if ended:
        audit.record("session.end" if session_id is not None else "token.revoke", what,
                     {"why": why})
    db.session.commit()
    return ended


def sign_out_everywhere(user: User, why: str = sessions.ENDED_BY_ADMIN) -> None:
    """End every session and revoke every token of user."""
    end_access(user, why)
    audit.record("user.sign_out_everywhere", user_target(user), {"why": why})
    db.session.commit()


def reset_password(user: User) -> str:
    """Give user a new one-time password, ending their sessions and tokens and switching
    two-factor off (the account's recovery: they set it up again); return it."""
    password = one_time_password()
    user.set_password(password)
    user.must_change_password = True
    had_two_factor = totp.is_on(user)
    totp.turn_off(user)
    end_access(user, sessions.PASSWORD_RESET)
    audit.record("user.reset_password", user_target(user),
                 {"sign_in": "with a one-time password",  # never the password itself
                  "two_factor": "turned off" if had_two_factor else "was off"})
    db.session.commit()
    return password


def password_errors(new: str, confirm: str) -> dict[str, str]:
    """Return what is wrong with a new password and its confirmation."""
    if len(new) < MIN_PASSWORD:
        return {"new_password": f"Use at least {MIN_PASSWORD} characters."}
    if new != confirm:
        return {"confirm_password": "The two passwords differ."}
    return {}


def change_password(user: User, new: str, keep: str) -> None:
    """Set user's own new password; end their other sessions and revoke their tokens."""
    user.set_password(new)
    user.must_change_password = False
    end_access(user, sessions.PASSWORD_CHANGED, keep=keep)
    audit.record("user.password", user_target(user), {"other_sessions": "ended"})
    db.session.commit()


def set_timezone(user: User, zone: str) -> None:
    """Change user's own time zone (recorded only when it changes)."""
    if zone != user.timezone:
        audit.record("user.settings", user_target(user), {"timezone": [user.timezone, zone]})
        user.timezone = zone
    db.session.commit()


def change_role(user: User, role: str) -> None:
    """Change user's role, never leaving the site without an active admin."""
    if role not in User.ROLES:
        raise AccountError({"role": "Pick admin, editor or viewer."})
    if role != "admin":
        _keep_an_admin(user, "change the role of")
    audit.record("user.role", user_target(user), {"role": [user.role, role]})
    user.role = role
    db.session.commit()


def set_active(user: User, active: bool) -> None:
    """Activate or deactivate user (ending their sessions and tokens), keeping an admin."""
    if not active:
        _keep_an_admin(user, "deactivate")
    audit.record("user.activate" if active else "user.deactivate", user_target(user),
                 {"active": [user.active, active]})
    user.active = active
    if not active:
        end_access(user, sessions.DEACTIVATED)
    db.session.commit()


def _keep_an_admin(user: User, action: str) -> None:
    """Refuse to take away the last active admin (rows locked against a concurrent change)."""
    if not (user.active and user.role == "admin"):
        return
    admins = db.session.scalars(
        sa.select(User.id).where(User.role == "admin", User.active.is_(True))
        .with_for_update()).all()
    if set(admins) <= {user.id}:
        db.session.rollback()
        raise AccountError({"form": f"You cannot {action} the last active admin: make another "
                                    "user an admin first."})
