"""Sessions with the official JavaScript SDK (js/sessions.mjs, one node run)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from js_runner import run_js

TOPOLOGY = {"namespaces": {"compat": {"queues": {
    "sessions": {"requires_session": True}, "sessions-next": {"requires_session": True}}}}}


@pytest.fixture(scope="module")
def js(serve) -> dict[str, Any]:
    return run_js("sessions.mjs", serve(TOPOLOGY)["compat"])


def test_a_named_session_keeps_order_state_and_its_lock(js) -> None:
    named = js["named"]
    assert named["sessionId"] == "A"
    assert named["bodies"] == ["a1", "a2", "a3"] and named["sessionIds"] == ["A", "A", "A"]
    assert named["initialState"] is None and named["state"] == {"step": 2} and named["clearedState"] is None
    locked, renewed = (dt.datetime.fromisoformat(named[k]) for k in ("lockedUntil", "renewedUntil"))
    assert renewed >= locked
    assert named["sessions"] == {"B": ["b1"]}


def test_session_refusals(js) -> None:
    assert js["named"]["taken"]["code"] == "SessionCannotBeLocked"
    refused = js["named"]["refused"]  # a message without a session id to a session queue
    assert "SessionId was not set" in refused["message"] and refused["retryable"] is False


def test_next_available_sessions_then_a_timeout_when_none_is_left(js) -> None:
    assert js["next"]["got"] == {"X": ["x1", "x2"], "Y": ["y1"]}
    assert js["next"]["none"]["code"] == "ServiceTimeout"
    assert js["next"]["waitedMs"] < 5000  # the client's 2 s timeout, not the broker's default minute
