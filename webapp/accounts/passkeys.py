"""Passkeys (WebAuthn, with the webauthn package): register under Settings, sign in alone.

The relying party is SITE_URL's host, and the origin SITE_URL's scheme, host and port:
without SITE_URL passkeys are unavailable outside debug (a Host header is the client's
to choose, and a passkey bound to the wrong name is useless). Each ceremony's challenge is
stored server-side, expires after CHALLENGE_SECONDS and is used once, whatever the answer.
Sign-in asks for a discoverable credential: the authenticator says whose it is.
Registration and sign-in require user verification (a PIN, a fingerprint, a face): a key
that proves only a touch (the user-present flag), as a stolen one without its PIN does, is
refused, alone or as a second factor.
"""

import base64
import json
from datetime import timedelta
from urllib.parse import urlsplit

import sqlalchemy as sa
from flask import current_app, request

from ..extensions import db
from ..models import Passkey, User, WebAuthnChallenge, utcnow

CHALLENGE_SECONDS = 300


class PasskeyError(ValueError):
    """A ceremony refused, with the reason in words, the passkey's owner when known, and
    whether the answer named a challenge of ours (an answer to nothing decides nothing)."""

    def __init__(self, message: str, owner: User | None = None, *,
                 ours: bool = True) -> None:
        super().__init__(message)
        self.owner, self.ours = owner, ours


UNVERIFIED = ("This passkey did not verify you (its PIN, fingerprint or face): a passkey "
              "counts only with that. Set a PIN or a fingerprint on the device, or use your "
              "password.")


def _webauthn():
    """Return the webauthn package and its structs, imported at the first ceremony.

    With cryptography, pyOpenSSL and pyasn1 it is a sixth of the app's import time (0.12 s
    of CPU): every gunicorn master, worker respawn and flask command paid it, though only a
    passkey's registration or sign-in uses it.
    """
    import webauthn
    from webauthn.helpers import structs

    return webauthn, structs


def relying_party() -> tuple[str, str] | None:
    """Return (rp id, origin) from SITE_URL (the request's own host in debug), or None."""
    site = current_app.config["SITE_URL"]
    if not site:
        if not current_app.debug:
            return None
        site = request.host_url
    parts = urlsplit(site)
    return parts.hostname or "", f"{parts.scheme}://{parts.netloc}"


def _relying_party() -> tuple[str, str]:
    """Return (rp id, origin); refuse when passkeys cannot work here."""
    rp = relying_party()
    if rp is None:
        raise PasskeyError("Passkeys need SITE_URL set to this site's address.")
    return rp


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _store(challenge: bytes, purpose: str, user: User | None) -> None:
    db.session.execute(sa.delete(WebAuthnChallenge).where(
        WebAuthnChallenge.expires_at < utcnow()))  # the expired ones, as we go
    db.session.add(WebAuthnChallenge(
        challenge=_b64(challenge), purpose=purpose, user_id=user.id if user else None,
        expires_at=utcnow() + timedelta(seconds=CHALLENGE_SECONDS)))
    db.session.commit()


def _take(credential: dict, purpose: str) -> WebAuthnChallenge:
    """Find and use up the challenge the browser's answer signed; refuse an unknown one."""
    try:
        client = json.loads(base64.urlsafe_b64decode(
            credential["response"]["clientDataJSON"] + "=="))
        sent = client["challenge"]
    except (KeyError, TypeError, ValueError) as exc:
        raise PasskeyError("The browser's answer could not be read.", ours=False) from exc
    found = db.session.scalar(sa.select(WebAuthnChallenge).where(
        WebAuthnChallenge.challenge == sent, WebAuthnChallenge.purpose == purpose))
    if found is None:
        raise PasskeyError("This request was used already or is unknown: try again.",
                           ours=False)
    db.session.delete(found)  # single-use, whatever the answer
    db.session.commit()
    if found.expires_at < utcnow():
        raise PasskeyError("This request expired: try again.")
    return found


def registration_options(user: User) -> str:
    """Return the options (JSON) for navigator.credentials.create, for a new passkey."""
    rp = _relying_party()
    webauthn, structs = _webauthn()
    options = webauthn.generate_registration_options(
        rp_id=rp[0], rp_name=current_app.config["SITE_NAME"],
        user_name=user.email, user_id=str(user.id).encode(),
        authenticator_selection=structs.AuthenticatorSelectionCriteria(
            resident_key=structs.ResidentKeyRequirement.REQUIRED,
            user_verification=structs.UserVerificationRequirement.REQUIRED),
        exclude_credentials=[structs.PublicKeyCredentialDescriptor(id=p.credential_id)
                             for p in listed(user)])
    _store(options.challenge, "register", user)
    return webauthn.options_to_json(options)


def register(user: User, credential: dict, name: str) -> Passkey:
    """Verify the browser's new credential against its challenge and keep it."""
    found = _take(credential, "register")
    if found.user_id != user.id:
        raise PasskeyError("This request was made for someone else.")
    rp = _relying_party()
    webauthn, _structs = _webauthn()
    verified = _verify(webauthn.verify_registration_response, None, credential=credential,
                       expected_challenge=base64.urlsafe_b64decode(found.challenge + "=="),
                       expected_rp_id=rp[0], expected_origin=rp[1])
    passkey = Passkey(user_id=user.id, credential_id=verified.credential_id,
                      public_key=verified.credential_public_key,
                      sign_count=verified.sign_count,
                      name=(name.strip() or "Passkey")[:60])
    db.session.add(passkey)
    db.session.commit()
    return passkey


def authentication_options(user: User | None = None) -> str:
    """Return the options (JSON) for navigator.credentials.get: any passkey of this site, or
    user's (the second step after their password)."""
    rp = _relying_party()
    webauthn, structs = _webauthn()
    allowed = [structs.PublicKeyCredentialDescriptor(id=p.credential_id)
               for p in listed(user)] if user is not None else None
    options = webauthn.generate_authentication_options(
        rp_id=rp[0], user_verification=structs.UserVerificationRequirement.REQUIRED,
        allow_credentials=allowed)
    _store(options.challenge, "sign-in", user)
    return webauthn.options_to_json(options)


def has_any(user: User) -> bool:
    return db.session.scalar(sa.select(Passkey.id).where(Passkey.user_id == user.id)
                             .limit(1)) is not None


def authenticate(credential: dict) -> User:
    """Return the active user whose passkey signed the challenge; raise PasskeyError."""
    found = _take(credential, "sign-in")
    try:
        raw_id = base64.urlsafe_b64decode(credential["rawId"] + "==")
    except (KeyError, TypeError, ValueError) as exc:
        raise PasskeyError("The browser's answer could not be read.") from exc
    passkey = db.session.scalar(sa.select(Passkey).where(Passkey.credential_id == raw_id))
    if passkey is None:
        raise PasskeyError("This passkey is not known here (was it removed?).")
    rp = _relying_party()
    webauthn, _structs = _webauthn()
    user = db.session.get(User, passkey.user_id)
    verified = _verify(webauthn.verify_authentication_response, user, credential=credential,
                       expected_challenge=base64.urlsafe_b64decode(found.challenge + "=="),
                       expected_rp_id=rp[0], expected_origin=rp[1],
                       credential_public_key=passkey.public_key,
                       credential_current_sign_count=passkey.sign_count)
    if found.user_id is not None and found.user_id != passkey.user_id:
        raise PasskeyError("This passkey is someone else's.", user)
    if user is None or not user.active:
        raise PasskeyError("This account cannot sign in.", user)
    passkey.sign_count, passkey.last_used_at = verified.new_sign_count, utcnow()
    db.session.commit()
    return user


def _verify(check, owner: User | None, **answer):
    """Run the library's check of a ceremony's answer, user verification required; say why
    in words when it refuses."""
    try:
        return check(**answer, require_user_verification=True)
    except Exception as exc:  # noqa: BLE001  (the library's many refusals, in words)
        if "user verification" in str(exc).lower():
            raise PasskeyError(UNVERIFIED, owner) from exc
        raise PasskeyError(f"The passkey was not accepted: {exc}", owner) from exc


def listed(user: User) -> list[Passkey]:
    return list(db.session.scalars(sa.select(Passkey).where(Passkey.user_id == user.id)
                                   .order_by(Passkey.created_at)))


def remove(user: User, passkey_id: int) -> Passkey | None:
    """Remove one of user's passkeys; return it (None if it is not theirs). Caller commits."""
    found = db.session.get(Passkey, passkey_id)
    if found is None or found.user_id != user.id:
        return None
    db.session.delete(found)
    return found
