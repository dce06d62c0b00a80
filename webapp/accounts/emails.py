"""Email addresses as accounts: one spelling each, none that looks like another.

An address is stored NFKC-normalised and lower-cased, so two spellings of one address are
one account. Refused: invisible and direction-changing characters (zero-width spaces,
right-to-left overrides: Unicode's format and control categories), and a part (the local
part or a domain label) that mixes letters of two scripts, as a Cyrillic "і" in a Latin
name does, the classic look-alike of a real admin.
"""

import re
import unicodedata

EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
MAX_LENGTH = 254


class EmailError(ValueError):
    """An address refused, with the reason in words for the form."""


def normalise(raw: str) -> str:
    """Return the one spelling an address is stored and looked up by."""
    return unicodedata.normalize("NFKC", raw).strip().lower()


def clean_email(raw: str) -> str:
    """Return the address to store, or raise EmailError saying what is wrong with it."""
    email = normalise(raw)
    hidden = next((c for c in email if unicodedata.category(c) in ("Cf", "Cc", "Co", "Cn")),
                  None)
    if hidden is not None:
        raise EmailError(f"This address holds an invisible or direction-changing character "
                         f"({_codepoint(hidden)}); type it again without it.")
    if not EMAIL.match(email) or len(email) > MAX_LENGTH:
        raise EmailError("Type an email address, like ada@example.com.")
    local, _, domain = email.rpartition("@")
    for part in (local, *domain.split(".")):
        scripts = _scripts(part)
        if len(scripts) > 1:
            named = " and ".join(sorted(scripts))
            raise EmailError(f"“{part}” mixes {named} letters, so it can look like another "
                             f"address; use the letters of one script.")
    return email


def shown(email: str) -> str:
    """Return an address as a page shows it: any character a stored address should not
    hold (it predates these rules) written as its code point, so it cannot pass for
    another."""
    return "".join(_codepoint(c) if unicodedata.category(c) in ("Cf", "Cc", "Co", "Cn")
                   else c for c in email)


# scripts that one language writes together: Japanese mixes kanji and kana, Korean hanja
TOGETHER = {"Cjk": "Han", "Hiragana": "Han", "Katakana": "Han", "Hangul": "Han"}


def _scripts(part: str) -> set[str]:
    """Return the scripts of a part's letters (Latin, Cyrillic, Greek...; digits have none)."""
    found = set()
    for char in part:
        if char.isalpha():
            name = unicodedata.name(char, "")
            script = name.split(" ", 1)[0].title() if name else "Unknown"
            found.add(TOGETHER.get(script, script))
    return found


def _codepoint(char: str) -> str:
    return f"U+{ord(char):04X}"
