"""A real PgBouncer: locks are refused through a pooler, a session-mode one allowed on request."""

import logging

import pytest

from tests.harness.cluster import wait_for
from tests.harness.pgbouncer import pooled_url, shared_bouncer
from webapp.leadership.election import Leadership
from webapp.leadership.keys import PUBLISH
from webapp.leadership.pg import PgLockSession, TransactionPoolerError


@pytest.fixture
def bouncer(tmp_path, request):
    """Start PgBouncer in the pool mode given by the test's parameter; return its port."""
    with shared_bouncer(tmp_path, request.param) as running:
        yield running.port


def _connect_when_up(session: PgLockSession) -> None:
    def attempt() -> bool:
        try:
            session.connect()
        except TransactionPoolerError:
            raise
        except Exception:  # pgbouncer still starting
            return False
        return True

    wait_for(attempt, 10, "pgbouncer to accept connections", interval=0.1)


@pytest.mark.parametrize("bouncer", ["transaction"], indirect=True)
def test_locks_are_refused_through_a_transaction_pooler(app, pg_url, bouncer, caplog):
    session = PgLockSession(pooled_url(pg_url, bouncer), "behind-bouncer")
    with pytest.raises(TransactionPoolerError, match="set LOCK_DATABASE_URL"):
        _connect_when_up(session)
    leadership = Leadership(session, [PUBLISH.value], 10)
    with caplog.at_level(logging.ERROR, "soloist.leadership"):
        assert leadership.ensure_connected() is False
    assert "transaction-mode pooler" in caplog.text
    assert leadership.held == {}


@pytest.mark.parametrize("bouncer", ["session"], indirect=True)
def test_a_session_mode_pooler_is_refused_unless_the_operator_allows_one(app, pg_url, bouncer,
                                                                         pg_view):
    # a pooler hands out its own backend pid: the lock session cannot tell a session-mode
    # one from a transaction-mode one that happens to keep it on one backend for a while
    refused = PgLockSession(pooled_url(pg_url, bouncer), "strict-bouncer")
    with pytest.raises(TransactionPoolerError, match="LOCK_ALLOW_POOLER=true"):
        _connect_when_up(refused)
    session = PgLockSession(pooled_url(pg_url, bouncer), "session-bouncer", allow_pooler=True)
    try:
        _connect_when_up(session)
        assert session.try_lock(PUBLISH.value)
        assert PUBLISH.value in pg_view.holders()
    finally:
        session.close()


@pytest.mark.parametrize("bouncer", ["transaction"], indirect=True)
def test_a_transaction_pooler_is_refused_even_when_the_operator_allows_poolers(app, pg_url,
                                                                               bouncer):
    session = PgLockSession(pooled_url(pg_url, bouncer), "allowed-bouncer", allow_pooler=True)
    with pytest.raises(TransactionPoolerError, match="transaction-mode pooler"):
        _connect_when_up(session)
