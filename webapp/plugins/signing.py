"""Standard Webhooks signatures (https://www.standardwebhooks.com) for webhook deliveries.

Every request carries webhook-id (the delivery id, the same on every retry),
webhook-timestamp (when the attempt was claimed, unix seconds) and webhook-signature:
`v1,` and the base64 HMAC-SHA256 of "{id}.{timestamp}.{body}". The key is what the
spec's libraries read from a `whsec_<base64>` secret: the decoded bytes. Secrets an
admin typed without that prefix (Soloist offered no other form before, and still
accepts them) sign with their UTF-8 bytes, which a receiver hands to the library as
bytes: `Webhook(secret.encode())`.
"""

import base64
import binascii
import hashlib
import hmac
import secrets

PREFIX = "whsec_"
SECRET_BYTES = 32
KEY_BYTES = (24, 64)  # what the spec asks of a whsec_ secret


def new_secret() -> str:
    """Return a fresh random secret in the spec's whsec_<base64> form."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def whsec_key(secret: str) -> bytes | None:
    """Return the key a whsec_ secret holds, or None if secret is not one."""
    if not secret.startswith(PREFIX):
        return None
    text = secret[len(PREFIX):]
    try:  # unpadded base64 too, as the libraries accept it
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def key(secret: str) -> bytes:
    """Return the HMAC key of secret: a whsec_ secret's bytes, else its UTF-8 bytes."""
    found = whsec_key(secret)
    return secret.encode() if found is None else found


def headers(delivery_id: str, secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """Return the Standard Webhooks headers of one attempt at a delivery."""
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(key(secret), signed, hashlib.sha256).digest()
    return {"webhook-id": delivery_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": "v1," + base64.b64encode(digest).decode()}
