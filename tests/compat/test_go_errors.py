"""Errors as the official Go SDK reports them (go/errors.go, one run, no client retries): each error a client
meets, as an `*azservicebus.Error` code where the SDK has one and the AMQP condition underneath, fast, and the
broker still serving afterwards."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import test_js_errors
from go_runner import run_go
from test_js_errors import FAST_MS

# The JavaScript suite's queues and a session queue whose lock (5 s) the Go scenario lets run out.
TOPOLOGY = {"namespaces": {"compat": {"queues": {
    **test_js_errors.TOPOLOGY["namespaces"]["compat"]["queues"],
    "session-locks": {"requires_session": True, "lock_duration": "PT5S"}}}}}


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


def test_a_session_lock_run_out_detaches_its_receiver(go) -> None:
    """As Service Bus does (com.microsoft:session-lock-lost on the detach): before, the link lived on, the SDK
    recovered it and re-accepted the session, and both calls below answered success for a message that came
    back anyway."""
    lost = go["sessionLock"]
    assert lost["renew"]["code"] == "locklost", lost["renew"]
    assert "session lock has expired" in lost["renew"]["message"]
    assert lost["complete"] is not None  # no false success (the SDK retries till its context ends)
    [again] = lost["redelivered"]
    assert (again["body"], again["deliveryCount"]) == ("held too long", 2)  # the expiry counted a delivery
