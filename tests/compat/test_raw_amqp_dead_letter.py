"""Dead-lettering over the receive link as .NET and Java do it: a `rejected` outcome whose error condition is
`com.microsoft:dead-letter` and whose info map carries DeadLetterReason, DeadLetterErrorDescription and the
properties to modify, all kept on the dead-lettered message (as the management path and abandon keep them)."""

# ruff: noqa: F811 (`connection` is test_raw_amqp's fixture)
from __future__ import annotations

import pytest
from proton import Condition, Message, symbol

from tests.compat.test_raw_amqp import TIMEOUT_S, authorize, connection  # noqa: F401

TOPOLOGY = {"namespaces": {"dl": {"queues": {"q": {}}}}}


@pytest.fixture(scope="module")
def namespace(serve):
    return serve(TOPOLOGY)["dl"]


def test_a_rejected_outcome_keeps_reason_description_and_further_properties(namespace, connection) -> None:
    authorize(connection, namespace)
    connection.create_sender("q").send(Message(id="m1", body=b"x", properties={"kept": "yes"}))
    receiver = connection.create_receiver("q", credit=1)
    assert receiver.receive(timeout=TIMEOUT_S).id == "m1"
    [delivery] = receiver.fetcher.unsettled
    delivery.local.condition = Condition(symbol("com.microsoft:dead-letter"), "dead-lettered", {
        symbol("DeadLetterReason"): "bad order", symbol("DeadLetterErrorDescription"): "no such item",
        symbol("attempts"): 3, symbol("stage"): "billing"})
    receiver.reject()
    dead = connection.create_receiver("q/$DeadLetterQueue", credit=1).receive(timeout=TIMEOUT_S)
    assert dead.id == "m1"
    assert dead.properties == {"kept": "yes", "DeadLetterReason": "bad order", "attempts": 3,
                               "DeadLetterErrorDescription": "no such item", "stage": "billing"}
