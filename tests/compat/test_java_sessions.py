"""Sessions with the official Java SDK (java/.../Sessions.java, one JVM run)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from java_runner import run_java
from test_js_sessions import TOPOLOGY  # the same entities as the JavaScript suite


@pytest.fixture(scope="module")
def java(serve) -> dict[str, Any]:
    return run_java("sessions", serve(TOPOLOGY)["compat"])


def test_a_named_session_keeps_order_state_and_its_lock(java) -> None:
    named = java["named"]
    assert named["sessionId"] == "A"
    assert named["bodies"] == ["a1", "a2", "a3"] and named["sessionIds"] == ["A", "A", "A"]
    assert named["initialState"] is None and named["state"] == '{"step":2}' and named["clearedState"] is None
    renewed_at, renewed_until = (dt.datetime.fromisoformat(named[k].replace("Z", "+00:00"))
                                 for k in ("renewedAt", "renewedUntil"))
    assert renewed_until - renewed_at > dt.timedelta(seconds=50)  # the queue's lock duration: one minute
    assert named["sessions"] == {"B": ["b1"]}


def test_session_refusals(java) -> None:
    taken = java["named"]["taken"]  # held by another receiver (on a connection of its own)
    # The session receiver throws the link's AmqpException as it is, with Service Bus's condition.
    assert (taken["error"]["name"], taken["error"]["condition"]) == (
        "AmqpException", "com.microsoft:session-cannot-be-locked"), taken
    assert taken["ms"] < 3000
    refused = java["named"]["refused"]["error"]  # a message without a session id to a session queue
    assert "SessionId was not set" in refused["message"] and refused["transient"] is False


def test_next_available_sessions_then_a_timeout_when_none_is_left(java) -> None:
    assert java["next"]["got"] == {"X": ["x1", "x2"], "Y": ["y1"]}
    none = java["next"]["none"]
    assert none["error"]["condition"] == "com.microsoft:timeout", none
    assert none["ms"] < 5000  # within the client's 2 s try timeout, not the broker's default minute
