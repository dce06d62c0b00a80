"""Characters XML 1.0 cannot hold: find them in text to refuse it, strip them to render it.

XML allows tab, newline and carriage return of the C0 controls, and no lone surrogates,
U+FFFE or U+FFFF. A post holding any other reaches the Atom feed, and one such character
makes /feed.xml unreadable for every subscriber.
"""

import re

UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def unsafe_character(text: str) -> str | None:
    """Say which character of text XML cannot hold, and where, or None when there is none."""
    found = UNSAFE.search(text)
    if found is None:
        return None
    return f"U+{ord(found.group()):04X} at character {found.start() + 1}"


def strip_unsafe(text: str) -> str:
    """Return text without the characters XML cannot hold (rows stored before the check)."""
    return UNSAFE.sub("", text)
