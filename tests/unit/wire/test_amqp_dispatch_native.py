"""The collector's events handed out by the C module (`drain`, what `reactor.EngineThread` gives the loop)
and by the pure-Python reference (`Loop._dispatch` with `reactor.dispatch_event`): the same handler calls, in
the same order, with the same events, the same transports marked and closed, on real proton connections
whose frames are moved in memory; and a handler's error closes only its own connection (`Guarded`)."""

from __future__ import annotations

from typing import Any

import cproton_ffi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Connection, Delivery, Endpoint, Transport
from proton._events import Collector, Event

from local_broker.wire.amqp import native as reference
from local_broker.wire.amqp import values
from local_broker.wire.amqp.loop import Loop, Turn
from local_broker.wire.amqp.reactor import Guarded, LazyEvent, dispatch_event, native_drain
from tests.unit.wire.test_amqp_transfer_native import Pair

_LIB, _FFI = cproton_ffi.lib, cproton_ffi.ffi


class Recorder:
    """A broker-side connection handler that opens what the client opens, takes transfers in, and notes
    every call: (method, event type, link name, delivery tag or payload). `on_delivery` and `on_link_flow`
    get proton's C event, the others a `LazyEvent`."""

    def __init__(self, log: list[tuple[Any, ...]]) -> None:
        self.log = log

    def on_connection_remote_open(self, event: LazyEvent) -> None:
        self.log.append(("connection_remote_open", event.type.number))
        event.connection.open()

    def on_session_remote_open(self, event: LazyEvent) -> None:
        self.log.append(("session_remote_open", event.type.number))
        event.session.open()

    def on_link_remote_open(self, event: LazyEvent) -> None:
        self.log.append(("link_remote_open", event.type.number, event.link.name))
        event.link.source.copy(event.link.remote_source)
        event.link.target.copy(event.link.remote_target)
        event.link.open()
        if event.link.is_receiver:
            event.link.flow(5)

    def on_link_remote_close(self, event: LazyEvent) -> None:
        self.log.append(("link_remote_close", event.type.number, event.link.name))
        event.link.close()

    def on_link_flow(self, event: Any) -> None:
        link = _LIB.pn_event_link(event)
        self.log.append(("link_flow", _LIB.pn_event_type(event), _FFI.string(_LIB.pn_link_name(link)),
                         _LIB.pn_link_credit(link)))

    def on_delivery(self, event: Any) -> None:
        delivery, link = _LIB.pn_event_delivery(event), _LIB.pn_event_link(event)
        payload = reference.delivery_in(link, delivery, 5)
        name = _FFI.string(_LIB.pn_link_name(link))
        self.log.append(("delivery", _LIB.pn_event_type(event), name, payload))
        if payload == b"boom":
            raise RuntimeError("a bad frame")
        if type(payload) is bytes:
            _LIB.pn_delivery_update(delivery, Delivery.ACCEPTED)
            _LIB.pn_delivery_settle(delivery)


class TransportRecord:
    """Stands for loop.TransportIO in the loop's `_by_transport`: notes being closed."""

    def __init__(self, log: list[tuple[Any, ...]], name: str) -> None:
        self.log, self.name = log, name

    def close(self) -> None:
        self.log.append(("transport_closed", self.name))


OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("send"), st.binary(max_size=700), st.booleans()),
    st.tuples(st.just("flow"), st.integers(1, 4)),
    st.tuples(st.just("broker_send"), st.binary(max_size=64)),
    st.tuples(st.just("settle"), st.sampled_from([Delivery.ACCEPTED, Delivery.RELEASED, Delivery.MODIFIED])),
    st.tuples(st.just("close_link")),
), max_size=12)


def _run(operations: list[tuple[Any, ...]], c_module: Any, boom: bool = False) -> list[tuple[Any, ...]]:
    """The broker's side of two client connections (the second one quiet) driven by `operations`, its
    collector drained after each by `c_module` or (None) the reference; the calls and bookkeeping noted."""
    log: list[tuple[Any, ...]] = []
    handled = {Event.CONNECTION_REMOTE_OPEN.number, Event.SESSION_REMOTE_OPEN.number,
               Event.LINK_REMOTE_OPEN.number, Event.LINK_REMOTE_CLOSE.number, Event.LINK_FLOW.number,
               Event.DELIVERY.number}
    collector = Collector()
    loop = Loop(collector, dispatch_event, handled.__contains__)
    if c_module is not None:  # as the broker runs it (SBFED_PURE_PYTHON=1 runs the reference only)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(values, "_native", c_module)
            loop.drain = native_drain(loop, handled)
        assert loop.drain is not None
    turn = Turn()
    pairs = []
    for name in ("first", "second"):
        client, server = Connection(), Connection()
        client_io, server_io = Transport(), Transport(Transport.SERVER)
        server_io.max_frame_size = 512
        client_io.bind(client)
        server_io.bind(server)
        server.collect(collector)
        server.handler = Guarded(Recorder(log), turn)
        loop._by_transport[server_io._impl] = TransportRecord(log, name)
        pairs.append((client, client_io, server_io))

    def pump() -> None:
        """Move the frames both ways and hand out the events they made, until no frame is left to move."""
        moved = True
        while moved:
            moved = False
            for _, client_io, server_io in pairs:
                size, back = client_io.pending(), server_io.pending()
                if size > 0:
                    server_io.push(client_io.peek(size))
                    client_io.pop(size)
                if back > 0:
                    client_io.push(server_io.peek(back))
                    server_io.pop(back)
                moved = moved or size > 0 or back > 0
            loop._dispatch()

    client = pairs[0][0]
    for other, _, _ in pairs:
        other.open()
    session = client.session()
    session.open()
    sender, receiver = session.sender("to-broker"), session.receiver("from-broker")
    sender.open()
    receiver.open()
    pump()
    broker_sender = next(link for link in _links(pairs[0][2].connection) if link.is_sender)
    tag = 0
    for operation in operations + ([("send", b"boom", False)] if boom else []):
        kind = operation[0]
        if kind == "send" and sender.state & Endpoint.LOCAL_ACTIVE:
            tag += 1
            delivery = sender.delivery(str(tag))
            sender.send(operation[1])
            sender.advance()
            if operation[2]:
                delivery.settle()
        elif kind == "flow" and receiver.state & Endpoint.LOCAL_ACTIVE:
            receiver.flow(operation[1])
        elif kind == "broker_send" and broker_sender.state & Endpoint.LOCAL_ACTIVE and broker_sender.credit:
            tag += 1
            reference.send_raw(broker_sender._impl, b"t%d" % tag, operation[1], False)
        elif kind == "settle":
            incoming = receiver.current
            while incoming is not None:
                incoming.update(operation[1])
                incoming.settle()
                incoming = receiver.current
        elif kind == "close_link" and sender.state & Endpoint.LOCAL_ACTIVE:
            sender.close()
        pump()
    log.append(("touched", sorted(io.name for io in loop.touched)))
    log.append(("conditions", [c.remote_condition and c.remote_condition.name for c, _, _ in pairs]))
    for _, client_io, server_io in pairs:  # the connections' ends: TRANSPORT_CLOSED for both
        client_io.close_tail()
        server_io.close_tail()
        server_io.close_head()
    loop._dispatch()
    return log


def _links(connection: Connection) -> list[Any]:
    found, link = [], connection.link_head(0)
    while link:
        found.append(link)
        link = link.next(0)
    return found


@settings(max_examples=40, deadline=None)
@given(operations=OPERATIONS)
def test_the_c_drain_hands_out_what_the_reference_does(native, operations) -> None:
    reference.bind(native)
    expected = _run(operations, None)
    assert _run(operations, native) == expected
    assert ("connection_remote_open", Event.CONNECTION_REMOTE_OPEN.number) in expected
    assert ("transport_closed", "first") in expected and ("transport_closed", "second") in expected


def test_every_hot_event_reaches_its_handler_as_the_c_event(native) -> None:
    reference.bind(native)
    operations = [("send", b"x" * 600, False), ("flow", 2), ("broker_send", b"m"),
                  ("settle", Delivery.ACCEPTED)]
    for c_module in (None, native):
        log = _run(operations, c_module)
        kinds = [entry[0] for entry in log]
        assert ("delivery", Event.DELIVERY.number, b"to-broker", b"x" * 600) in log, c_module
        assert ("link_flow", Event.LINK_FLOW.number, b"from-broker", 2) in log, c_module
        assert kinds.count("delivery") >= 2, c_module  # the transfer, then the client's settlement
        assert ("touched", ["first", "second"]) in log, c_module


def test_a_handler_error_closes_its_connection_and_the_drain_goes_on(native, caplog) -> None:
    reference.bind(native)
    for c_module in (None, native):
        log = _run([("send", b"fine", False)], c_module, boom=True)
        # the other connection's events are still handed out
        assert ("conditions", ["amqp:internal-error", None]) in log, c_module
        assert ("transport_closed", "second") in log, c_module
        assert "a bad frame" in caplog.text


def test_link_state_reads_what_the_reference_does(native) -> None:
    bound = reference.bind(native)
    connection = Connection()
    session = connection.session()
    kept, bare = session.sender("kept"), session.sender("bare")
    kept.sb = state = object()
    for link, expected in ((kept, state), (bare, None)):
        assert reference.link_state(link._impl) is expected
        assert bound.link_state(link._impl) is expected


def _delivery_event(settled: bool, state: Any) -> tuple[Pair, Any, Collector]:
    """A client transfer (settled by the client or not) on a Pair whose broker receiver keeps `state` as
    `sb`; the collector's head is its DELIVERY event."""
    pair = Pair()
    pair.broker_receiver.sb = state
    pair.broker_receiver.flow(1)
    pair.pump()
    collector = Collector()
    pair.server.collect(collector)
    delivery = pair.sender.delivery(b"t")
    pair.sender.send(b"m")
    pair.sender.advance()
    if settled:
        delivery.settle()
    pair.pump()
    while _LIB.pn_event_type(_LIB.pn_collector_peek(collector._impl)) != Event.DELIVERY.number:
        _LIB.pn_collector_pop(collector._impl)
    return pair, _LIB.pn_collector_peek(collector._impl), collector


@pytest.mark.parametrize("settled", [False, True])
def test_a_delivery_event_and_its_settlement_read_as_the_reference_does(native, settled: bool) -> None:
    bound = reference.bind(native)
    state = object()
    outcomes = {}
    for name, module in (("python", reference), ("c", bound)):
        pair, event, _ = _delivery_event(settled, state if name == "c" else None)
        delivery, link, got = module.delivery_event(event)
        assert (delivery, link) == (pair.broker_receiver.current._impl, pair.broker_receiver._impl), name
        assert got is (state if name == "c" else None), name
        kept: list[Any] = []
        module.keep_unsettled(delivery, kept)
        outcomes[name] = (len(kept), pair.broker_receiver.current is None)
        if kept:
            reference.settle_all(kept, Delivery.ACCEPTED)
        pair.pump()
    assert outcomes["c"] == outcomes["python"]
    assert outcomes["c"][0] == (0 if settled else 1)


@pytest.mark.parametrize(("credit", "kept", "closed"),
                         [(3, True, False), (3, False, False), (3, True, True), (0, True, False)])
def test_a_flow_event_is_read_as_the_reference_does(native, credit: int, kept: bool, closed: bool) -> None:
    bound = reference.bind(native)
    state = object()
    found = {}
    for name, module in (("python", reference), ("c", bound)):
        pair = Pair()
        if kept:
            pair.broker_sender.sb = state
        if closed:
            pair.broker_sender.close()
        collector = Collector()
        pair.server.collect(collector)
        pair.receiver.flow(credit)
        pair.receiver.drain_mode = credit == 0  # a flow frame with no credit
        pair.pump()
        impl = _LIB.pn_collector_peek(collector._impl)
        while impl != _FFI.NULL and _LIB.pn_event_type(impl) != Event.LINK_FLOW.number:
            _LIB.pn_collector_pop(collector._impl)
            impl = _LIB.pn_collector_peek(collector._impl)
        assert impl != _FFI.NULL, name
        got = module.flow_event(impl)
        found[name] = None if got is None else (got[0] == pair.broker_sender._impl, got[1] is state)
    assert found["c"] == found["python"]
    assert found["c"] == ((True, True) if credit and kept and not closed else None)
