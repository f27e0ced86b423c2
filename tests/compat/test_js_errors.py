"""Errors as the official JavaScript SDK reports them (js/errors.mjs, one node run, no client retries): each
error class a client meets, fast, and the broker still serving afterwards."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from js_runner import run_js

TOPOLOGY = {"namespaces": {"compat": {"queues": {
    "errors": {}, "error-sessions": {"requires_session": True}, "locks": {"lock_duration": "PT5S"}}}}}
FAST_MS = 3000  # an error is an answer, not a client timeout (10 s here)


@pytest.fixture(scope="module")
def js(serve) -> dict[str, Any]:
    return run_js("errors.mjs", serve(TOPOLOGY)["compat"])


def test_an_unknown_entity_is_messaging_entity_not_found(js) -> None:
    for operation in ("send", "receive"):
        outcome = js["notFound"][operation]
        assert outcome["error"]["code"] == "MessagingEntityNotFound", outcome
        assert "no-such-queue" in outcome["error"]["message"]
        assert outcome["ms"] < FAST_MS


def test_a_wrong_key_fails_fast_with_unauthorized_access(js) -> None:
    for operation in ("send", "peek"):
        outcome = js["unauthorized"][operation]
        assert outcome["error"]["code"] == "UnauthorizedAccess", outcome
        assert outcome["ms"] < FAST_MS


def test_messages_over_the_entity_limit_are_message_size_exceeded(js) -> None:
    size = js["size"]
    assert size["big"]["error"]["code"] == "MessageSizeExceeded"  # refused by the broker
    assert "262144" in size["big"]["error"]["message"]
    assert size["maxSizeInBytes"] == 262144 and size["fitsBatch"] is False
    assert size["list"]["error"]["code"] == "MessageSizeExceeded"  # sized by the SDK from the attach
    assert size["after"] == ["still serving"]


def test_a_locked_session_is_session_cannot_be_locked(js) -> None:
    assert js["sessions"]["second"]["error"]["code"] == "SessionCannotBeLocked"
    assert js["sessions"]["second"]["ms"] < FAST_MS


def test_an_expired_lock_is_message_lock_lost_and_a_renewed_one_settles(js) -> None:
    locks = js["locks"]
    assert locks["count"] == 2
    assert locks["lost"]["error"]["code"] == "MessageLockLost"
    assert locks["renewedComplete"] is None
    locked, renewed = (dt.datetime.fromisoformat(locks[k]) for k in ("lockedUntil", "renewedUntil"))
    assert renewed > locked
