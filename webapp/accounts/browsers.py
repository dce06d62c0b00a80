"""Name a browser from its User-Agent header as people say it: "Chrome on macOS".

A small table, not a full parser: the sessions and trusted browsers lists only need a person
to recognise their own devices. The first matching row wins, so the order matters (Edge's
and Opera's headers also say Chrome; Chrome's also says Safari; an iPhone's says Mac OS X).
"""

import re

BROWSERS = (
    ("Edg", "Edge"), ("OPR/", "Opera"), ("SamsungBrowser/", "Samsung Internet"),
    ("FxiOS/", "Firefox"), ("Firefox/", "Firefox"), ("CriOS/", "Chrome"),
    ("HeadlessChrome/", "Headless Chrome"), ("Chrome/", "Chrome"),
    ("Version/", "Safari"), ("curl/", "curl"), ("python-requests/", "Python requests"),
)
SYSTEMS = (
    ("iPhone", "iPhone"), ("iPad", "iPad"), ("Android", "Android"), ("CrOS", "ChromeOS"),
    ("Windows", "Windows"), ("Mac OS X", "macOS"), ("Macintosh", "macOS"),
    ("Linux", "Linux"),
)
SHORT = 40  # an unknown header is cut to this many characters (its title keeps it whole)


def _first(user_agent: str, table: tuple[tuple[str, str], ...]) -> str:
    return next((name for mark, name in table if mark in user_agent), "")


def browser_name(user_agent: str | None) -> str:
    """Return "Chrome on macOS", "Safari on iPhone", "Firefox", or the header itself cut
    short when it names nothing known ("—" when there is none)."""
    user_agent = (user_agent or "").strip()
    if not user_agent:
        return "—"
    browser, system = _first(user_agent, BROWSERS), _first(user_agent, SYSTEMS)
    if browser == "Safari" and "Safari/" not in user_agent:
        browser = ""  # "Version/" alone is some app's web view, not Safari
    if browser and system:
        return f"{browser} on {system}"
    if browser or system:
        return browser or f"A browser on {system}"
    text = re.sub(r"\s+", " ", user_agent)
    return text if len(text) <= SHORT else text[:SHORT - 1] + "…"
