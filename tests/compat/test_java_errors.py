"""Errors as the official Java SDK reports them (java/.../Errors.java, one JVM run, no client retries): each
error class a client meets as a ServiceBusException with its ServiceBusFailureReason (or, for a receive,
the AMQP condition under the SDK's own error), fast, and the broker still serving afterwards."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from java_runner import run_java
from test_js_errors import FAST_MS, TOPOLOGY  # the same entities and bound as the JavaScript suite


@pytest.fixture(scope="module")
def java(serve) -> dict[str, Any]:
    return run_java("errors", serve(TOPOLOGY)["compat"])


def error_of(outcome: dict[str, Any]) -> dict[str, Any]:
    assert "error" in outcome, f"expected an error, got {outcome}"
    assert outcome["ms"] < FAST_MS, outcome
    return outcome["error"]


def test_an_unknown_entity_is_messaging_entity_not_found(java) -> None:
    for operation in ("send", "peek"):
        error = error_of(java["notFound"][operation])
        assert (error["name"], error["reason"], error["transient"]) == (
            "ServiceBusException", "MESSAGING_ENTITY_NOT_FOUND", False), error
        assert "no-such-queue" in error["message"]
    receive = error_of(java["notFound"]["receive"])  # the sync receiver wraps the link's error
    assert receive["condition"] == "amqp:not-found" and "no-such-queue" in receive["amqpMessage"]


def test_a_wrong_key_fails_fast_with_unauthorized(java) -> None:
    for operation in ("send", "peek"):
        error = error_of(java["unauthorized"][operation])
        assert (error["reason"], error["condition"]) == ("UNAUTHORIZED", "amqp:unauthorized-access"), error
        assert "InvalidSignature" in error["message"]


def test_messages_over_the_entity_limit_are_message_size_exceeded(java) -> None:
    size = java["size"]
    big = error_of(size["big"])  # one message: refused by the broker
    assert (big["reason"], big["condition"]) == ("MESSAGE_SIZE_EXCEEDED", "amqp:link:message-size-exceeded")
    assert size["maxSizeInBytes"] == 262144  # the attach's max-message-size
    assert size["fitsBatch"]["error"]["reason"] == "MESSAGE_SIZE_EXCEEDED"  # sized by the SDK
    assert size["list"]["value"] is None  # 3 x 100 KB: the SDK splits a list into batches that fit
    assert sorted(size["after"]) == [13, *[100 * 1024] * 3]  # those three, then "still serving"


def test_a_locked_session_is_session_cannot_be_locked(java) -> None:
    error = error_of(java["sessions"]["second"])  # the link's AmqpException, as the SDK throws it
    assert (error["name"], error["condition"]) == ("AmqpException", "com.microsoft:session-cannot-be-locked")
    assert "cannot be accepted" in error["message"]


def test_an_expired_lock_is_message_lock_lost_and_a_renewed_one_settles(java) -> None:
    locks = java["locks"]
    assert locks["count"] == 2
    lost = error_of(locks["lost"])
    assert (lost["reason"], lost["condition"]) == ("MESSAGE_LOCK_LOST", "com.microsoft:message-lock-lost")
    assert locks["renewedComplete"] == {"value": None}
    locked, renewed = (dt.datetime.fromisoformat(locks[k].replace("Z", "+00:00"))
                       for k in ("lockedUntil", "renewedUntil"))
    assert renewed > locked
