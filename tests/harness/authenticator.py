"""A software authenticator: makes a passkey and answers WebAuthn challenges as a device
would, with the flags a test chooses. A security key stolen without its PIN still proves
presence (a touch) but not the person: verified=False says exactly that.

The server checks what a device sends, not what a browser asked for, so these answers go
straight to the app's JSON endpoints, as an attacker's client would send them.
"""

import base64
import hashlib
import json
import secrets

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

PRESENT, VERIFIED, ATTESTED = 0x01, 0x04, 0x40  # authenticator data flags


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SoftKey:
    """One passkey (an ES256 key pair) for one relying party."""

    def __init__(self, origin: str = "http://localhost") -> None:
        self.origin = origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = secrets.token_bytes(16)
        self.user_handle = b""
        self.count = 0

    def _auth_data(self, rp_id: str, verified: bool, attested: bytes = b"") -> bytes:
        self.count += 1
        flags = PRESENT | (VERIFIED if verified else 0) | (ATTESTED if attested else 0)
        return (hashlib.sha256(rp_id.encode()).digest() + bytes([flags])
                + self.count.to_bytes(4, "big") + attested)

    def _client_data(self, kind: str, options: dict) -> bytes:
        return json.dumps({"type": kind, "challenge": options["challenge"],
                           "origin": self.origin, "crossOrigin": False}).encode()

    def _cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"),
                            -3: numbers.y.to_bytes(32, "big")})

    def registration(self, options: dict, verified: bool = True) -> dict:
        """Answer navigator.credentials.create's options (attestation "none")."""
        self.user_handle = unb64(options["user"]["id"])
        attested = (bytes(16) + len(self.credential_id).to_bytes(2, "big")
                    + self.credential_id + self._cose_key())
        auth_data = self._auth_data(options["rp"]["id"], verified, attested)
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {"id": b64(self.credential_id), "rawId": b64(self.credential_id),
                "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": b64(self._client_data("webauthn.create", options)),
                             "attestationObject": b64(attestation),
                             "transports": ["internal"]}}

    def assertion(self, options: dict, verified: bool = True) -> dict:
        """Answer navigator.credentials.get's options with this passkey, signed."""
        auth_data = self._auth_data(options["rpId"], verified)
        client_data = self._client_data("webauthn.get", options)
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(),
                                  ec.ECDSA(hashes.SHA256()))
        return {"id": b64(self.credential_id), "rawId": b64(self.credential_id),
                "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": b64(client_data),
                             "authenticatorData": b64(auth_data), "signature": b64(signature),
                             "userHandle": b64(self.user_handle)}}
