"""The registry of scheduler keys: name -> signed 64-bit advisory lock key."""

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class SchedulerKey:
    """One scheduler key and what its leader is for."""

    name: str
    value: int
    purpose: str

    @property
    def hex(self) -> str:
        """Return the key as unsigned 64-bit hex, the way it is written in the docs."""
        return f"0x{self.value & 0xFFFFFFFFFFFFFFFF:x}"


PUBLISH = SchedulerKey("publish", 0x9A37B7A1, "publishes and unpublishes posts that are due")
PLUGINS = SchedulerKey("plugins", 0x7B9C5F3E, "runs plugin timers that are due")

_RESERVED = {PUBLISH.value, PLUGINS.value}


def derive_key(name: str) -> int:
    """Derive a stable signed 64-bit key from a name (never a 32-bit hash)."""
    digest = hashlib.blake2b(f"soloist:{name}".encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "big", signed=True)
    while value in _RESERVED:
        digest = hashlib.blake2b(digest, digest_size=8).digest()
        value = int.from_bytes(digest, "big", signed=True)
    return value


KEYS: dict[str, SchedulerKey] = {PUBLISH.name: PUBLISH, PLUGINS.name: PLUGINS}


def by_value(value: int) -> SchedulerKey | None:
    """Return the registered key with this value, if any."""
    return next((k for k in KEYS.values() if k.value == value), None)
