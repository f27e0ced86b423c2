"""Errors as the official Go SDK reports them (go/errors.go, one run, no client retries): each error a client
meets, as an `*azservicebus.Error` code where the SDK has one and the AMQP condition underneath, fast, and the
broker still serving afterwards."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from go_runner import run_go
from test_js_errors import FAST_MS, TOPOLOGY


@pytest.fixture(scope="module")
def go(serve) -> dict[str, Any]:
    return run_go("errors", serve(TOPOLOGY)["compat"])


def test_an_unknown_entity_is_not_found(go) -> None:
    for operation in ("send", "receive", "peek"):
        outcome = go["notFound"][operation]
        error = outcome["error"]  # the put-token's 404, as Service Bus answers it for a missing entity
        assert error["code"] == "notfound" and "status code 404" in error["message"], outcome
        assert "no-such-queue" in error["message"]
        assert outcome["ms"] < FAST_MS


def test_a_wrong_key_fails_fast_as_unauthorized(go) -> None:
    for operation in ("send", "peek"):
        outcome = go["unauthorized"][operation]
        assert outcome["error"]["code"] == "unauthorized", outcome
        assert outcome["ms"] < FAST_MS


def test_messages_over_the_entity_limit_are_refused_by_the_limit_the_attach_gave(go) -> None:
    """The Go SDK never sends a message over the link's max-message-size (256 KB, the Standard tier's, from
    the broker's attach): a single message is refused by the SDK, a batch sized bigger by go-amqp."""
    size = go["size"]
    assert size["big"]["error"]["message"] == "the message is too large"
    assert size["fitsBatch"]["message"] == "the message is too large"
    oversized = size["list"]["error"]
    assert oversized["condition"] == "amqp:link:message-size-exceeded"
    assert "262144" in oversized["description"]
    assert size["afterError"] is None and size["after"] == ["still serving"]


def test_a_locked_session_is_session_cannot_be_locked(go) -> None:
    second = go["sessions"]["second"]
    assert second["error"]["condition"] == "com.microsoft:session-cannot-be-locked", second
    assert second["ms"] < FAST_MS


def test_an_expired_lock_is_lock_lost_and_a_renewed_one_settles(go) -> None:
    locks = go["locks"]
    assert locks["count"] == 2
    assert locks["lost"]["error"]["code"] == "locklost", locks["lost"]
    assert locks["renewLost"]["code"] == "locklost", locks["renewLost"]
    assert locks["renewedComplete"] is None
    locked, renewed = (dt.datetime.fromisoformat(locks[k]) for k in ("lockedUntil", "renewedUntil"))
    assert renewed > locked
