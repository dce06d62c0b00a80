"""The limits a release's migrations run under, and the error that stops a release."""

from collections.abc import Mapping
from dataclasses import dataclass


class ReleaseError(Exception):
    """The release stopped; the message says why and what to do."""


@dataclass(frozen=True)
class Limits:
    """How long a migration's statements wait and run, and how often it is tried again."""

    lock_timeout: float
    retries: int
    statement_timeout: float
    backfill_seconds: float = 0.0  # a backfill's batches in the release; the fleet does the rest

    @classmethod
    def of(cls, config: Mapping) -> "Limits":
        """Return the limits the app's configuration sets."""
        return cls(config["MIGRATION_LOCK_TIMEOUT_SECONDS"], config["MIGRATION_LOCK_RETRIES"],
                   config["MIGRATION_STATEMENT_TIMEOUT_SECONDS"],
                   config["RELEASE_BACKFILL_SECONDS"])

    def session_sql(self) -> list[str]:
        """Return the statements that set these limits on the migrations' session."""
        return [f"SET lock_timeout = '{milliseconds(self.lock_timeout)}ms'",
                f"SET statement_timeout = '{milliseconds(self.statement_timeout)}ms'",
                "SET idle_in_transaction_session_timeout = 0"]

    def patient_sql(self) -> str:
        """Return the lock timeout for statements whose locks no read or write waits for."""
        return f"SET lock_timeout = '{milliseconds(self.statement_timeout)}ms'"

    def short_sql(self) -> str:
        """Return the lock timeout every other statement waits at most."""
        return self.session_sql()[0]


def milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))
