"""A connection handler's error closes its connection (reactor.Guarded), for both kinds of events the loop
hands out: proton's C event (deliveries, link flows) and a `LazyEvent` (everything else); and which of them
count as the turn's activity by themselves."""

from __future__ import annotations

import logging

import cproton_ffi
import pytest
from proton import Connection, Endpoint
from proton._events import Collector, Event

from local_broker.wire.amqp.loop import Turn
from local_broker.wire.amqp.reactor import Guarded, LazyEvent


class Failing:
    def on_delivery(self, event: object) -> None:
        raise RuntimeError("a bad frame")

    def on_link_remote_open(self, event: object) -> None:
        raise RuntimeError("a bad frame")


@pytest.mark.parametrize("lazy", [False, True])
def test_an_error_in_a_handler_closes_the_connection(lazy: bool, caplog: pytest.LogCaptureFixture) -> None:
    connection, collector = Connection(), Collector()
    connection.collect(collector)
    connection.open()
    impl = cproton_ffi.lib.pn_collector_peek(collector._impl)
    turn = Turn()
    guarded = Guarded(Failing(), turn)
    with caplog.at_level(logging.ERROR, logger="local_broker.amqp"):
        if lazy:
            guarded.on_link_remote_open(LazyEvent(impl, Event.LINK_REMOTE_OPEN.number))
        else:
            guarded.on_delivery(impl)
    assert connection.state & Endpoint.LOCAL_CLOSED
    assert connection.condition.name == "amqp:internal-error"
    assert "a bad frame" in caplog.text
    # a delivery says itself whether deadlines moved; any other event may have moved them
    assert turn.activity and turn.rearm is lazy



class Flow:
    def __init__(self, turn: Turn, readies: bool) -> None:
        self.turn, self.readies = turn, readies

    def on_link_flow(self, event: object) -> None:
        if self.readies:  # as NamespaceEndpoint.on_link_flow does when a receiver has credit to feed
            self.turn.activity = self.turn.rearm = True


@pytest.mark.parametrize("readies", [False, True])
def test_a_link_flow_is_the_turns_activity_only_when_its_handler_says_so(readies: bool) -> None:
    # proton raises a flow of its own once the broker has used a receiver's credit up: no end-of-turn work
    turn = Turn()
    Guarded(Flow(turn, readies), turn).on_link_flow(object())
    assert turn.activity is readies and turn.rearm is readies
