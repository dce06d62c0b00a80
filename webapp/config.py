"""Read configuration from the environment: the only module that reads os.environ.

Every default lives here: load_config sets every key the app reads, so the app reads
config["X"] with no second default beside it; the readers below serve gunicorn_conf.py,
which runs before any app exists. tests/test_architecture.py keeps os.environ out of every
other module.
"""

import math
import os
import re
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import dotenv
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConfigError(ValueError):
    """A configuration variable has a value Soloist cannot use."""


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    """Return a boolean variable; raise on anything but a clear yes or no."""
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, not {raw!r}")


def env_int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    """Return an integer variable no smaller than minimum."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, not {value}")
    return value


def env_float(env: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    """Return a number of seconds no smaller than minimum."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not value >= minimum:
        raise ConfigError(f"{name} must be at least {minimum}, not {raw!r}")
    return value


def normalise_database_url(url: str, name: str = "DATABASE_URL") -> str:
    """Rewrite postgres:// and postgresql:// to the psycopg 3 driver; check it can be read.

    libpq's host list (postgres://u@h1:5432,h2:5432/db) becomes SQLAlchemy's
    ?host=h1:5432&host=h2:5432, and a URL naming several hosts asks for the primary
    (target_session_attrs=read-write) unless it says otherwise: after a failover every
    connection finds the new primary, and none stays on a server that became read-only.
    """
    url = url.strip()
    for prefix in ("postgres://", "postgresql://", "postgresql+psycopg2://"):
        if url.startswith(prefix):
            url = "postgresql+psycopg://" + url[len(prefix):]
            break
    if url.startswith("sqlite:"):
        return url
    if not url.startswith("postgresql+psycopg://"):
        raise ConfigError(
            f"{name} must be a postgres:// or sqlite: URL, not {url.split(':')[0]}:…")
    return _checked_postgres_url(_host_list_as_query(url, name), name)


def _host_list_as_query(url: str, name: str) -> str:
    """Move a libpq host list out of the URL's authority into host= query parameters."""
    scheme, _, rest = url.partition("://")
    rest, hash_, fragment = rest.partition("#")
    rest, mark, query = rest.partition("?")
    authority, _slash, path = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    if "," not in hosts:
        return url
    listed = [h.strip() for h in hosts.split(",")]
    if not all(listed) or any(c in h for h in listed for c in "[]/?#"):
        raise ConfigError(f"{name} lists hosts Soloist cannot read: give each as host or "
                          "host:port, separated by commas (IPv6 addresses by name)")
    hosts_query = "&".join(f"host={h}" for h in listed)
    query = f"{query}&{hosts_query}" if query else hosts_query
    return f"{scheme}://{userinfo}{at}/{path}?{query}{hash_}{fragment}"


def _checked_postgres_url(url: str, name: str) -> str:
    """Return url (asking for the primary when it names several hosts), or raise ConfigError.

    The message names the variable, never the URL (it may carry a password).
    """
    try:
        parsed = make_url(url)
        hosts = parsed.query.get("host", ())
        if isinstance(hosts, tuple) and len(hosts) > 1 and (
                "target_session_attrs" not in parsed.query):
            parsed = parsed.update_query_dict({"target_session_attrs": "read-write"})
        PGDialect_psycopg().create_connect_args(parsed)
    except (ValueError, TypeError, sa_exc.ArgumentError) as exc:
        raise ConfigError(f"{name} is not a PostgreSQL URL Soloist can read "
                          f"({type(exc).__name__}: check its host list and ports)") from None
    return parsed.render_as_string(hide_password=False)


def site_url(env: Mapping[str, str]) -> str | None:
    """Return SITE_URL (scheme, host, optional path prefix, no trailing slash), or None."""
    raw = env.get("SITE_URL", "").strip()
    if not raw:
        return None
    example = "an http(s) URL such as https://example.com or https://example.com/blog"
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018  (raises ValueError on a port out of range)
    except ValueError:
        raise ConfigError(f"SITE_URL must be {example}, not {raw!r}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or (
            any(c.isspace() or ord(c) < 32 for c in raw)):
        raise ConfigError(f"SITE_URL must be {example}, not {raw!r}")
    if parts.query or parts.fragment or "?" in raw or "#" in raw or "@" in parts.netloc:
        raise ConfigError(f"SITE_URL must be {example}: no query (?), fragment (#) or user@")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


# a BCP 47 tag as <html lang> takes it: "en", "fr", "pt-BR", "zh-Hant"
LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}")


def site_language(env: Mapping[str, str]) -> str:
    """Return SITE_LANGUAGE (default en), or raise ConfigError for what is no language tag."""
    raw = env.get("SITE_LANGUAGE", "").strip() or "en"
    if not LANGUAGE_TAG.fullmatch(raw):
        raise ConfigError(f"SITE_LANGUAGE must be a language tag such as en, fr or pt-BR, "
                          f"not {raw[:40]!r}")
    return raw


def metrics_token(env: Mapping[str, str]) -> str | None:
    """Return METRICS_TOKEN, the scrape token for GET /metrics (None: API tokens only)."""
    raw = env.get("METRICS_TOKEN", "").strip()
    if not raw:
        return None
    if len(raw) < 32:
        raise ConfigError("METRICS_TOKEN must be at least 32 characters: "
                          "python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    return raw


def instance_path(env: Mapping[str, str] | None = None) -> str:
    """Return the instance folder: SOLOIST_INSTANCE_PATH, else instance/ beside webapp/."""
    env = os.environ if env is None else env
    return env.get("SOLOIST_INSTANCE_PATH") or str(ROOT / "instance")


def web_concurrency(env: Mapping[str, str]) -> int:
    """Return WEB_CONCURRENCY: gunicorn's workers per instance (the connection budget's too)."""
    return env_int(env, "WEB_CONCURRENCY", 2, minimum=1)


def server_settings(env: Mapping[str, str] | None = None) -> dict:
    """Return what gunicorn_conf.py reads before any app exists: the port, the workers and
    their threads, and the instance's name for its log lines."""
    env = os.environ if env is None else env
    return {"PORT": env_int(env, "PORT", 8000, minimum=1),
            "WEB_CONCURRENCY": web_concurrency(env),
            "GUNICORN_THREADS": env_int(env, "GUNICORN_THREADS", 4, minimum=1),
            "INSTANCE_NAME": instance_name(env)}


def metrics_dir(env: Mapping[str, str] | None = None) -> str | None:
    """Return PROMETHEUS_MULTIPROC_DIR: where this instance's workers add up their histograms."""
    env = os.environ if env is None else env
    return env.get("PROMETHEUS_MULTIPROC_DIR") or None


def set_metrics_dir(path: str) -> None:
    """Give the workers about to be forked their metrics directory.

    prometheus-client picks its multiprocess mode from the environment, and a SIGHUP
    reload of gunicorn keeps the environment: gunicorn_conf.py's master sets it here.
    """
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path


def read_dotenv(directory: str | None = None) -> str | None:
    """Load the .env file found from directory (or the working directory) upwards.

    As the Flask CLI does for `flask run`: variables already in the environment win,
    and no file is no error. gunicorn_conf.py calls it before reading PORT. Return the
    file's path, or None.
    """
    start = Path(directory or os.getcwd()).resolve()
    path = next((d / ".env" for d in (start, *start.parents) if (d / ".env").is_file()), None)
    if path is None:
        return None
    dotenv.load_dotenv(path, override=False, encoding="utf-8")
    return str(path)


def deadman_url(env: Mapping[str, str]) -> str | None:
    """Return DEADMAN_URL, the dead-man's switch the publish leader pings (None: no pings)."""
    raw = env.get("DEADMAN_URL", "").strip()
    if not raw:
        return None
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018  (raises ValueError on a port out of range)
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname or (
            any(c.isspace() or ord(c) < 32 for c in raw)):
        raise ConfigError("DEADMAN_URL must be an http(s) URL such as "
                          "https://hc-ping.com/<uuid> (its value, a secret, is not shown)")
    return raw


def deliver_after_replica(env: Mapping[str, str]) -> str:
    """Return whether deliveries wait for a standby's replay: auto, on or off."""
    raw = env.get("DELIVER_AFTER_REPLICA", "auto")
    value = raw.strip().lower() or "auto"
    if value not in ("auto", "on", "off"):
        raise ConfigError(f"DELIVER_AFTER_REPLICA must be auto, on or off, not {raw!r}")
    return value


def instance_name(env: Mapping[str, str]) -> str:
    """Name this instance from the platform's variables, else the hostname."""
    for name in (
        "INSTANCE_NAME",
        "DYNO",
        "FLY_MACHINE_ID",
        "RAILWAY_REPLICA_ID",
        "RENDER_INSTANCE_ID",
    ):
        if env.get(name, "").strip():
            return env[name].strip()
    return socket.gethostname()


RELEASE_VARIABLES = ("SOURCE_VERSION", "HEROKU_RELEASE_VERSION", "RENDER_GIT_COMMIT",
                     "FLY_IMAGE_REF")


def release_version(env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """Return the version being released and the variable that named it, if any."""
    env = os.environ if env is None else env
    for name in RELEASE_VARIABLES:
        if env.get(name, "").strip():
            return env[name].strip()[:200], name
    return None


PURGER_SCHEMES = ("varnish+http", "fastly", "cloudflare", "purge+http", "purge+https")


def cache_purgers(env: Mapping[str, str]) -> list[str]:
    """Return CACHE_PURGE's purger URLs (none: nothing is purged), or raise naming a bad one."""
    listed = [u.strip() for u in env.get("CACHE_PURGE", "").split(",") if u.strip()]
    for url in listed:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018  (raises ValueError on a port out of range)
        except ValueError:
            parts = None
        if parts is None or parts.scheme.lower() not in PURGER_SCHEMES or not parts.netloc:
            shown = url.rpartition("@")[2] if "://" in url else url  # no password shown
            raise ConfigError(
                f"CACHE_PURGE lists {shown!r}: give each purger as one of "
                f"{', '.join(s + '://…' for s in PURGER_SCHEMES)}, separated by commas")
    return listed


def load_config(env: Mapping[str, str] | None = None) -> dict:
    """Build the app's configuration from an environment mapping."""
    env = os.environ if env is None else env
    debug = env_bool(env, "FLASK_DEBUG", False)
    testing = env_bool(env, "TESTING", False)
    config: dict = {
        "DEBUG": debug,
        "TESTING": testing,
        "SECRET_KEY": env.get("SECRET_KEY") or None,
        # earlier keys, newest first, still accepted after a rotation (sessions, TOTP secrets)
        "SECRET_KEY_FALLBACKS": [k.strip() for k in env.get("SECRET_KEY_FALLBACKS", "")
                                 .split(",") if k.strip()],
        "SITE_URL": site_url(env),
        # the public site's name and description until an admin sets them (Site settings)
        "SITE_NAME": env.get("SITE_NAME", "").strip() or "Soloist",
        "SITE_DESCRIPTION": env.get("SITE_DESCRIPTION", "").strip(),
        # the zone readers' dates are in ("1 December 2026"); an unknown zone reads as UTC
        "SITE_TIMEZONE": env.get("SITE_TIMEZONE", "").strip() or "UTC",
        # the language readers' pages and the feed declare (<html lang>, xml:lang)
        "SITE_LANGUAGE": site_language(env),
        # how long a CDN or browser may serve a public page without asking again, and how
        # long after that a stale copy while it asks (0 and 0: ask every time, get a 304)
        "SITE_MAX_AGE_SECONDS": env_int(env, "SITE_MAX_AGE_SECONDS", 60),
        "SITE_STALE_SECONDS": env_int(env, "SITE_STALE_SECONDS", 300),
        # where changes are purged (webapp.site.surrogate); with one, a shared cache may keep
        # a public page this long (s-maxage) while browsers revalidate every visit
        "CACHE_PURGE": cache_purgers(env),
        "SITE_SHARED_MAX_AGE_SECONDS": env_int(env, "SITE_SHARED_MAX_AGE_SECONDS", 86_400),
        # each worker keeps the public pages it rendered, up to this many MB (0: none)
        "SITE_PAGE_CACHE_MB": env_int(env, "SITE_PAGE_CACHE_MB", 32),
        # the CDN APIs' tokens (secrets: never logged) and where their APIs are: not read
        # from the environment, where a stray variable could send a token elsewhere (a test
        # points them at its stand-in through create_app's config)
        "FASTLY_API_TOKEN": env.get("FASTLY_API_TOKEN", "").strip(),
        "CLOUDFLARE_API_TOKEN": env.get("CLOUDFLARE_API_TOKEN", "").strip(),
        "FASTLY_API_URL": "https://api.fastly.com",
        "CLOUDFLARE_API_URL": "https://api.cloudflare.com/client/v4",
        "INSTANCE_NAME": instance_name(env),
        "FOLLOWER_POLL_SECONDS": env_float(env, "FOLLOWER_POLL_SECONDS", 1.0, 0.05),
        "LEADER_STALE_SECONDS": env_float(env, "LEADER_STALE_SECONDS", 10.0, 0.5),
        "SCHEDULER_ENABLED": env_bool(env, "SCHEDULER_ENABLED", True),
        # a lock session that reports another backend than it runs on is a pooler: refused,
        # unless the operator vouches for a session-mode one (docs/configuration.md)
        "LOCK_ALLOW_POOLER": env_bool(env, "LOCK_ALLOW_POOLER", False),
        # where an instance's workers agree which of them is its one candidate (a lease
        # file each); local to the host, as /tmp is to a dyno
        "LEASE_DIR": env.get("LEASE_DIR", "").strip() or tempfile.gettempdir(),
        # exposed directly, X-Forwarded-For is whatever the client says: trust no proxy
        # unless the platform recipe names its router (Heroku, Render, Fly.io: 1)
        "TRUST_PROXY_HOPS": env_int(env, "TRUST_PROXY_HOPS", 0),
        # a sign-in session ends when idle this long or this old (webapp.accounts.sessions):
        # an admin's at ASVS level 2 (30 min, 12 h), an editor's or viewer's a working day
        # idle and a week in all (docs/accounts.md says why)
        "ADMIN_SESSION_IDLE_MINUTES": env_float(env, "ADMIN_SESSION_IDLE_MINUTES", 30.0, 1.0),
        "ADMIN_SESSION_MAX_HOURS": env_float(env, "ADMIN_SESSION_MAX_HOURS", 12.0, 0.1),
        "SESSION_IDLE_HOURS": env_float(env, "SESSION_IDLE_HOURS", 8.0, 0.01),
        "SESSION_MAX_DAYS": env_float(env, "SESSION_MAX_DAYS", 7.0, 0.01),
        # dangerous actions ask again for a proof older than this (webapp.accounts.stepup)
        "STEP_UP_MINUTES": env_float(env, "STEP_UP_MINUTES", 10.0, 0.01),
        # what one address may ask before proving anything (webapp.accounts.ratelimit)
        "API_TOKEN_FAILURES_PER_ADDRESS": env_int(env, "API_TOKEN_FAILURES_PER_ADDRESS", 20,
                                                  minimum=1),
        "PASSKEY_CHALLENGES_PER_ADDRESS": env_int(env, "PASSKEY_CHALLENGES_PER_ADDRESS", 30,
                                                  minimum=1),
        "SESSION_COOKIE_SECURE": env_bool(env, "SESSION_COOKIE_SECURE", False),
        "WEBHOOK_ALLOW_PRIVATE": env_bool(env, "WEBHOOK_ALLOW_PRIVATE", False),
        # the old X-Soloist-Signature (the body's HMAC, no time: replayable), for receivers
        # not yet on Standard Webhooks' webhook-signature; deprecated
        "WEBHOOK_LEGACY_SIGNATURE": env_bool(env, "WEBHOOK_LEGACY_SIGNATURE", False),
        "WEBHOOK_TIMEOUT_SECONDS": env_float(env, "WEBHOOK_TIMEOUT_SECONDS", 10.0, 0.1),
        # the first wait before a failed webhook delivery, hook call or purge is tried
        # again; webhooks then follow Standard Webhooks' schedule in units of it
        # (webhook_sends.retry_delay: 9 attempts span about 18 hours), hooks double it up to
        # an hour, purges repeat it
        "RETRY_SECONDS": env_float(env, "RETRY_SECONDS", 5.0, 0.01),
        "WEBHOOK_MAX_ATTEMPTS": env_int(env, "WEBHOOK_MAX_ATTEMPTS", 9, minimum=1),
        # an event's deliveries wait until a standby has replayed it (webapp.ops.replica)
        "DELIVER_AFTER_REPLICA": deliver_after_replica(env),
        "DELIVER_AFTER_REPLICA_MAX_SECONDS": env_float(
            env, "DELIVER_AFTER_REPLICA_MAX_SECONDS", 30.0, 0.0),
        "HOOK_MAX_ATTEMPTS": env_int(env, "HOOK_MAX_ATTEMPTS", 10, minimum=1),
        "HOOK_TIMEOUT_SECONDS": env_float(env, "HOOK_TIMEOUT_SECONDS", 30.0, 0.1),
        "PLUGIN_MAX_ABANDONED": env_int(env, "PLUGIN_MAX_ABANDONED", 2, minimum=1),
        # the largest image an editor may upload (the request may be a little larger: the form)
        "MEDIA_MAX_BYTES": env_int(env, "MEDIA_MAX_BYTES", 10_000_000, minimum=1),
        # the most an upload's pixels may take decoded: width × height × frames × channels
        "MEDIA_MAX_DECODED_MB": env_int(env, "MEDIA_MAX_DECODED_MB", 200, minimum=1),
        "DB_POOL_SIZE": env_int(env, "DB_POOL_SIZE", 3, minimum=1),
        "DB_MAX_OVERFLOW": env_int(env, "DB_MAX_OVERFLOW", 1),
        # plugin work's own pool, on the plugins key's leader only (webapp.scheduling.engines)
        "PLUGIN_DB_POOL_SIZE": env_int(env, "PLUGIN_DB_POOL_SIZE", 2, minimum=1),
        "DB_REVALIDATION_CONNECTION": env_bool(env, "DB_REVALIDATION_CONNECTION", True),
        "OPS_NO_LEADER_SECONDS": env_float(env, "OPS_NO_LEADER_SECONDS", 30.0, 1.0),
        "OPS_POST_LATE_SECONDS": env_float(env, "OPS_POST_LATE_SECONDS", 60.0, 1.0),
        "REVISIONS_KEEP": env_int(env, "REVISIONS_KEEP", 50, minimum=1),
        "DEADMAN_URL": deadman_url(env),
        "DEADMAN_EVERY_SECONDS": env_float(env, "DEADMAN_EVERY_SECONDS", 60.0, 0.5),
        "METRICS_TOKEN": metrics_token(env),
        # set by webapp/gunicorn_conf.py: the workers' histograms are added up from its files
        "PROMETHEUS_MULTIPROC_DIR": metrics_dir(env),
        # the workers of each instance, as gunicorn reads them (the connection budget's)
        "WEB_CONCURRENCY": web_concurrency(env),
        # not a setting of the environment: werkzeug's own (scrypt) unless a test app asks
        # for a cheaper one, for the hundreds of accounts a test run makes
        "PASSWORD_HASH_METHOD": "scrypt",
        # a release's migrations (webapp.ops.release): how long one statement waits for a
        # lock before the migration gives way (the fleet waits behind it at most this), how
        # often a migration that gave way is tried again, and how long one statement may run
        "MIGRATION_LOCK_TIMEOUT_SECONDS": env_float(env, "MIGRATION_LOCK_TIMEOUT_SECONDS", 0.3,
                                                    0.01),
        "MIGRATION_LOCK_RETRIES": env_int(env, "MIGRATION_LOCK_RETRIES", 40),
        "MIGRATION_STATEMENT_TIMEOUT_SECONDS": env_float(
            env, "MIGRATION_STATEMENT_TIMEOUT_SECONDS", 600.0, 1.0),
        # how long a release runs a migration's backfill before it leaves the rest to the
        # fleet (webapp.ops.release.backfills): the new code does not wait for the copy
        "RELEASE_BACKFILL_SECONDS": env_float(env, "RELEASE_BACKFILL_SECONDS", 10.0, 0.0),
        "SQLALCHEMY_DATABASE_URI": None,
        "LOCK_DATABASE_URL": None,
    }
    config["DB_WEB_VIA_POOLER"] = bool(env.get("DATABASE_CONNECTION_POOL_URL"))
    web_url = env.get("DATABASE_CONNECTION_POOL_URL") or env.get("DATABASE_URL")
    if web_url:
        name = "DATABASE_CONNECTION_POOL_URL" if env.get("DATABASE_CONNECTION_POOL_URL") else (
            "DATABASE_URL"
        )
        config["SQLALCHEMY_DATABASE_URI"] = normalise_database_url(web_url, name)
    lock_url = env.get("LOCK_DATABASE_URL") or env.get("DATABASE_URL")
    if lock_url:
        name = "LOCK_DATABASE_URL" if env.get("LOCK_DATABASE_URL") else "DATABASE_URL"
        config["LOCK_DATABASE_URL"] = normalise_database_url(lock_url, name)
    return config


MIN_SECRET_BITS = 256  # 32 random bytes: secrets.token_urlsafe(32) or token_hex(32)
_HEX = set("0123456789abcdefABCDEF")
_CLASSES = (set("abcdefghijklmnopqrstuvwxyz"), set("ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
            set("0123456789"), set("-_"))
_URLSAFE = set().union(*_CLASSES)


def secret_key_bits(key: str) -> float:
    """Estimate the random bits in a secret key: its length times the bits of its alphabet.

    A key that repeats itself (few distinct characters or four-character runs) counts as
    having none, however long: 'a' * 64 is one guess.
    """
    if len(set(key)) < 10:
        return 0.0
    grams = [key[i:i + 4] for i in range(len(key) - 3)]
    if len(set(grams)) < 0.9 * len(grams):
        return 0.0
    chars = set(key)
    if chars <= _HEX:
        alphabet = 16
    elif chars <= _URLSAFE and chars & _CLASSES[0] and chars & _CLASSES[1]:
        # url-safe base64, as secrets.token_urlsafe makes it: 64 symbols, whichever of them
        # this key happens to use (43 random characters lack every digit 1 time in 1,500)
        alphabet = 64
    else:
        alphabet = sum(len(c) for c in _CLASSES if c & set(key))
        alphabet += 32 if set(key) - set().union(*_CLASSES) else 0
    return len(key) * math.log2(alphabet)


def check_production_config(config: Mapping) -> None:
    """Refuse to start a production app without a secret key of 32 random bytes (the
    earlier ones in SECRET_KEY_FALLBACKS too), or without SITE_URL."""
    if config.get("DEBUG") or config.get("TESTING"):
        return
    make = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
    key = config.get("SECRET_KEY")
    if not key:
        raise ConfigError(f"SECRET_KEY is not set: set it to a long random string ({make})")
    if secret_key_bits(str(key)) < MIN_SECRET_BITS:
        raise ConfigError(
            "SECRET_KEY is too guessable: it needs 32 random bytes (at least 43 characters "
            f"of url-safe base64 or 64 hex digits, not a word or a pattern). Make one: {make}")
    # an earlier key still signs sessions and decrypts TOTP secrets: a guessable one is as
    # bad as a guessable SECRET_KEY
    for place, old in enumerate(config.get("SECRET_KEY_FALLBACKS") or [], 1):
        if secret_key_bits(str(old)) < MIN_SECRET_BITS:
            raise ConfigError(
                f"SECRET_KEY_FALLBACKS: key {place} of the list is too guessable (it needs 32 "
                "random bytes, as SECRET_KEY does): anything it signed can be forged. Take "
                "it out; users whose two-factor secret it still encrypts set theirs up again")
    if not config.get("SITE_URL"):
        # without it the feed's, the sitemap's and the canonical links would name whatever
        # Host a client sent, on pages shared caches keep and serve to everyone
        raise ConfigError(
            "SITE_URL is not set: set it to the site's public address, e.g. "
            "https://example.com or https://example.com/blog (absolute links name it, never "
            "the Host header a client sent)")
