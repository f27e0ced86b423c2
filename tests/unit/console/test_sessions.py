"""Console sessions: sign-in by key, the one-time link, expiry (a fake clock), and rights."""

from __future__ import annotations

import pytest

from local_broker.auth import LISTEN, MANAGE, NamespaceAuth, SharedAccessPolicy
from local_broker.console.sessions import SESSION_SECONDS, Sessions
from local_broker.engine import UnauthorizedError

ROOT = SharedAccessPolicy("RootManageSharedAccessKey", "cm9vdC1rZXk=")
READER = SharedAccessPolicy("reader", "cmVhZGVyLWtleQ==", frozenset({LISTEN}))
NOW = 1_700_000_000.0


def _sessions() -> Sessions:
    return Sessions(NamespaceAuth([ROOT, READER]), ROOT)


def test_a_key_opens_a_session_with_its_policy_rights() -> None:
    sessions = _sessions()
    cookie, session = sessions.login_with_key(" reader ", "cmVhZGVyLWtleQ==", NOW)
    assert sessions.find(cookie, NOW) == session and session.policy == READER
    session.require(LISTEN)
    with pytest.raises(UnauthorizedError, match="'Manage' claim"):
        session.require(MANAGE)
    with pytest.raises(UnauthorizedError):
        sessions.login_with_key("reader", "d3Jvbmc=", NOW)
    with pytest.raises(UnauthorizedError):
        sessions.login_with_key("nobody", "cmVhZGVyLWtleQ==", NOW)


def test_a_pasted_connection_string_brings_its_policy_name_and_key() -> None:
    sessions = _sessions()
    pasted = "Endpoint=sb://localhost:5672;SharedAccessKeyName=reader;SharedAccessKey=cmVhZGVyLWtleQ==;" \
             "UseDevelopmentEmulator=true;"
    _, session = sessions.login_with_key("RootManageSharedAccessKey", f" {pasted} ", NOW)
    assert session.policy == READER  # the name in the string wins over the form's default
    with pytest.raises(UnauthorizedError):
        sessions.login_with_key("reader", pasted.replace("cmVhZGVyLWtleQ==", "d3Jvbmc="), NOW)


def test_the_one_time_token_works_once_and_a_wrong_one_does_not_use_it_up() -> None:
    sessions = _sessions()
    token = sessions.one_time_token()
    assert token
    with pytest.raises(UnauthorizedError):
        sessions.login_once("guess", NOW)
    _, session = sessions.login_once(token, NOW)
    assert session.policy == ROOT and sessions.one_time_token() is None
    with pytest.raises(UnauthorizedError, match="works once"):
        sessions.login_once(token, NOW)


def test_sessions_expire_and_close() -> None:
    sessions = _sessions()
    cookie, _ = sessions.login_with_key("RootManageSharedAccessKey", "cm9vdC1rZXk=", NOW)
    other, _ = sessions.login_with_key("reader", "cmVhZGVyLWtleQ==", NOW)
    assert sessions.find(cookie, NOW + SESSION_SECONDS - 1) is not None
    assert sessions.find(cookie, NOW + SESSION_SECONDS) is None
    assert sessions.find(None, NOW) is None and sessions.find("forged", NOW) is None
    sessions.close(other)
    assert sessions.find(other, NOW) is None
