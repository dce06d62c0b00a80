"""One attempt at one claimed webhook delivery: the signed request, the send, the outcome.

webapp.plugins.webhooks claims deliveries and decides who sends; this module makes one
attempt of a claim. The claim is re-checked right before the send (still_held: a fenced
write, the leadership included), the request is read and the transaction ended before the
receiver is called; the outcome is written only while the claim still holds (a stale sender
changes nothing), with the endpoint's health: a third failure in a row turns the
endpoint failing (an ops.webhook_failing alert) and it backs off as a whole. A failed
delivery is retried on its own schedule (retry_delay: first after RETRY_SECONDS,
5 s by default, then 30 s, 2 min, 5 min, 30 min, 2 h …, jittered); one failure delays
only its own delivery.
"""

import hashlib
import hmac
import http.client
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from flask import current_app

from ..db import rows_changed
from ..extensions import db
from ..leadership.fence import Lead
from ..models import WebhookDelivery, WebhookEndpoint
from ..ops import alerts, replica
from . import signing
from .net import UnsafeURL, post

log = logging.getLogger("soloist.plugins.webhooks")

# Standard Webhooks' reference schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h) with two
# steps put in (30 s, 2 min) so a blip of a minute or two is bridged by the third or fourth
# attempt, in units of the first retry's delay: with 5 s, 5 s, 30 s, 2 min, 5 min, 30 min …
SCHEDULE = (1, 6, 24, 60, 360, 1440, 3600, 7200, 7200)
JITTER = 0.2  # each wait is up to 20 % shorter, at random: retries after an outage spread out
FAILING_AFTER = 3  # failed attempts in a row before the endpoint as a whole backs off


def sign(secret: str, body: bytes) -> str:
    """Return the legacy X-Soloist-Signature value for body (WEBHOOK_LEGACY_SIGNATURE).

    It signs the body alone, no time: a captured request verifies again whenever it is
    replayed. Standard Webhooks' webhook-signature (webapp.plugins.signing) signs the id and
    the attempt's time with it, and is always sent.
    """
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def retry_delay(failures: int, first: float | None = None,
                jitter: Callable[[], float] = random.random) -> timedelta:
    """Return the wait after the failures-th failed attempt in a row (1: the first retry).

    SCHEDULE in units of first (RETRY_SECONDS), its last step repeated, shortened
    by up to JITTER at random (never later than the schedule says).
    """
    first = current_app.config["RETRY_SECONDS"] if first is None else first
    step = SCHEDULE[min(max(failures, 1), len(SCHEDULE)) - 1]
    return timedelta(seconds=first * step * (1 - JITTER * jitter()))


@dataclass(frozen=True)
class Claim:
    """One attempt at one delivery: only writes carrying this token count.

    lead is the leadership it was claimed under: the send is fenced by it too.
    """

    delivery_id: int
    token: str
    lead: Lead | None = None


def _mine(claim: Claim) -> list[sa.ColumnElement[bool]]:
    return [WebhookDelivery.id == claim.delivery_id, WebhookDelivery.claim == claim.token,
            WebhookDelivery.status == "sending"]


def still_held(claim: Claim, at: datetime) -> bool:
    """Re-check the claim at the moment of the send; return whether it may be sent.

    A fenced write: the claim is still this attempt's and its leadership still leads
    (open: not handed over, not evicted). The lease starts again here. A claim whose
    leadership has ended is handed back (pending, the attempt not counted) for the
    successor to send at once: a leader stopping for a deploy sends nothing new.
    """
    fence = [] if claim.lead is None else [claim.lead.holds()]
    held = rows_changed(sa.update(WebhookDelivery).where(*_mine(claim), *fence)
                        .values(claimed_at=at))
    if not held and fence:
        db.session.execute(sa.update(WebhookDelivery).where(*_mine(claim)).values(
            status="pending", claim="", attempts=WebhookDelivery.attempts - 1))
    db.session.commit()
    return bool(held)


def request(claim: Claim) -> tuple[str, bytes, dict[str, str], bool]:
    """Return the url, body and headers of a claimed delivery, and whether it may be sent."""
    delivery = db.session.get_one(WebhookDelivery, claim.delivery_id)
    endpoint = db.session.get_one(WebhookEndpoint, delivery.endpoint_id)
    body = delivery.body.encode()
    headers = {"X-Soloist-Event": delivery.topic, "X-Soloist-Delivery": delivery.delivery_id}
    if endpoint.active:
        if current_app.config["WEBHOOK_LEGACY_SIGNATURE"]:
            headers["X-Soloist-Signature"] = sign(endpoint.secret, body)
        attempted = delivery.claimed_at or datetime.now(UTC)  # the attempt's time
        headers |= signing.headers(delivery.delivery_id, endpoint.secret, body,
                                   int(attempted.timestamp()))
    found = (endpoint.url, body, headers, endpoint.active)
    db.session.rollback()  # hold no transaction while the receiver answers
    return found


Pause = Callable[[float], None] | None  # the scheduler's sleep, lent to a sender thread
REASSERT_SECONDS = 30.0  # how long a sender writes an outcome again until a standby has it


def attempt(claim: Claim, now: Callable[[], datetime], pause: Pause = None) -> str:
    """Send one claimed delivery once; record delivered, retrying, failed (or stale).

    Where a standby must have what leaves (webapp.ops.replica), the claim is on it before
    the request goes (else it is handed back, unsent) and the outcome after (written
    again until it is): a lossy failover cannot then forget a send that was made.
    """
    if not still_held(claim, now()):
        return "stale"  # taken over, superseded, or its leadership has ended: not sent
    try:
        url, body, headers, active = request(claim)
        gated = not _past_bound(claim, now())
        if gated and not _claim_replicated(claim, pause):
            return "stale"  # no standby has the claim: handed back, not sent
    except sa.exc.SQLAlchemyError:  # the database went away before anything was sent
        db.session.rollback()
        log.warning("webhook delivery %s not sent: the database went away", claim.delivery_id)
        return "stale"  # its claim lapses with its lease, or is taken once this process goes
    try:
        status, error, final = _send(url, body, headers, active)
    except Exception as exc:  # anything else is a failed attempt too, never a stuck one
        db.session.rollback()
        log.exception("webhook delivery %s failed unexpectedly", claim.delivery_id)
        status, error, final = None, f"{type(exc).__name__}: {exc}", False
    if error:
        log.info("webhook delivery %s failed: %s", claim.delivery_id, error)
    if not gated:  # past the gate's bound it goes whatever the standby says, and so does this
        return record(claim, status, error, final, now())
    return _record_replicated(claim, status, error, final, now, pause)


def _send(url: str, body: bytes, headers: dict[str, str],
          active: bool) -> tuple[int | None, str, bool]:
    """POST the delivery; return the status, the error ("" if none) and whether it is final."""
    timeout = current_app.config["WEBHOOK_TIMEOUT_SECONDS"]
    try:
        if not active:
            raise UnsafeURL("The endpoint is switched off.")
        status = post(url, body, headers, timeout,
                      current_app.config["WEBHOOK_ALLOW_PRIVATE"])
    except UnsafeURL as exc:
        return None, f"Not sent: {exc}", True
    except TimeoutError:
        return None, f"No answer within {timeout:g} s.", False
    except (OSError, http.client.HTTPException) as exc:
        return None, f"{type(exc).__name__}: {exc}", False
    return status, "" if 200 <= status < 300 else f"The receiver answered HTTP {status}.", False


def _past_bound(claim: Claim, at: datetime) -> bool:
    """Return whether the delivery's event is older than the gate's bound (it goes anyway)."""
    created = db.session.scalar(sa.select(WebhookDelivery.created_at).where(
        WebhookDelivery.id == claim.delivery_id))
    db.session.rollback()
    return created is not None and created < at - replica.bound()


def _claim_replicated(claim: Claim, pause: Pause) -> bool:
    """Return whether a standby has the claim (or need not); else hand the claim back."""
    if replica.confirmed(pause):
        return True
    db.session.execute(sa.update(WebhookDelivery).where(*_mine(claim)).values(
        status="pending", claim="", attempts=WebhookDelivery.attempts - 1))
    db.session.commit()
    log.info("webhook delivery %s waits: no standby has its claim yet", claim.delivery_id)
    return False


def _record_replicated(claim: Claim, status: int | None, error: str, final: bool,
                       now: Callable[[], datetime], pause: Pause) -> str:
    """Record the outcome, and write it again until a standby has it (or REASSERT_SECONDS).

    The request has gone: if the primary is lost before its standby has the outcome, the
    new primary shows the claim still sending, and its successor would send it again.
    This sender knows better: it writes the outcome again, on whichever primary it then
    reaches, where the claim it holds is still sending. On the same primary the second
    write finds the claim done (stale) and changes nothing.
    """
    deadline, result = time.monotonic() + REASSERT_SECONDS, None
    while True:
        try:
            written = record(claim, status, error, final, now())
            result = result or written
            if replica.confirmed(pause):
                return result
        except sa.exc.SQLAlchemyError as exc:  # the primary is away: try again
            db.session.rollback()
            log.info("webhook delivery %s: outcome not written yet (%s)", claim.delivery_id,
                     type(exc).__name__)
        if pause is None or time.monotonic() >= deadline:
            return result or "stale"
        pause(0.5)


# What a failed attempt's error means, for the webhooks page (the raw text stays a click away)
IN_WORDS = (
    ("ConnectionRefused", "The receiver refused the connection: nothing is listening at that "
                          "address and port."),
    ("No answer within", "The receiver did not answer in time."),
    ("timed out", "The receiver did not answer in time."),
    ("gaierror", "The receiver's host name could not be found (DNS)."),
    ("Name or service not known", "The receiver's host name could not be found (DNS)."),
    ("SSL", "The receiver's TLS certificate could not be verified, or TLS failed."),
    ("ConnectionReset", "The receiver closed the connection before answering."),
    ("RemoteDisconnected", "The receiver closed the connection before answering."),
    ("Not sent:", "Not sent: the address is not one Soloist calls (private, loopback, or "
                  "switched off)."),
)


def in_words(error: str) -> str:
    """Say what a delivery error means in a sentence ("" for none); HTTP answers by class."""
    if not error:
        return ""
    answered = error.removeprefix("The receiver answered HTTP ").rstrip(".")
    if answered.isdigit():
        code = int(answered)
        if code >= 500:
            return f"The receiver is up but failed to handle the event (HTTP {code})."
        if code in (401, 403):
            return (f"The receiver refused the event (HTTP {code}): check that it has this "
                    "endpoint's secret.")
        return f"The receiver refused the event (HTTP {code}): check the URL."
    for needle, words in IN_WORDS:
        if needle in error:
            return words
    return "The delivery failed."


def record(claim: Claim, status: int | None, error: str, final: bool, at: datetime) -> str:
    """Write the attempt's outcome if the claim still holds; update the endpoint's health."""
    delivery = db.session.get(WebhookDelivery, claim.delivery_id)
    if delivery is None:  # gone with a lossy failover's lost commits: nothing to record
        db.session.rollback()
        return "stale"
    values: dict[str, Any] = {"last_attempt_at": at, "response_status": status,
                              "last_error": error[:500], "claim": ""}
    if not error:
        values.update(status="delivered", delivered_at=at, next_attempt_at=None)
    elif final or delivery.attempts >= current_app.config["WEBHOOK_MAX_ATTEMPTS"]:
        values.update(status="failed", next_attempt_at=None)
    else:
        values.update(status="pending", next_attempt_at=at + retry_delay(delivery.attempts))
    done = rows_changed(
        sa.update(WebhookDelivery).where(WebhookDelivery.id == claim.delivery_id,
                                         WebhookDelivery.claim == claim.token,
                                         WebhookDelivery.status == "sending")
        .values(**values))
    if done:
        _endpoint_health(delivery.endpoint_id, error, at)
    db.session.commit()
    if not done:
        return "stale"
    return {"delivered": "delivered", "failed": "failed"}.get(values["status"], "retrying")


def _endpoint_health(endpoint_id: int, error: str, at: datetime) -> None:
    """Count the attempt into the endpoint's health, in one UPDATE each (no read first).

    Senders of one endpoint may record at once (an abandoned one and its successor):
    failures = failures + 1 in the statement, so no failure is lost to a concurrent write.
    """
    endpoint = sa.update(WebhookEndpoint).where(WebhookEndpoint.id == endpoint_id)
    if not error:
        db.session.execute(endpoint.values(last_attempt_at=at, failures=0, last_error="",
                                           retry_at=None))
        return
    failures, url = db.session.execute(
        endpoint.values(last_attempt_at=at, failures=WebhookEndpoint.failures + 1,
                        last_error=error[:500])
        .returning(WebhookEndpoint.failures, WebhookEndpoint.url)).one()
    if failures == FAILING_AFTER:  # it turns failing: once per failing spell
        alerts.webhook_failing(endpoint_id, url, failures, error[:500], at)
    if failures >= FAILING_AFTER:  # it keeps failing: the whole endpoint backs off
        db.session.execute(endpoint.values(
            retry_at=at + retry_delay(failures - FAILING_AFTER + 1)))
