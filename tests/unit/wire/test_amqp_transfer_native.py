"""A client's transfers and dispositions taken in, and the broker's settlements, by the C module
(`delivery_in`, `settle_all`) and by native.py's pure-Python reference: the same payloads, credit,
dispositions, settlements and outcomes the client sees, on real proton connections whose frames are moved in
memory (cut anywhere)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Connection, Delivery, Transport

from local_broker.wire.amqp import compat
from local_broker.wire.amqp import native as reference


class Pair:
    """A client connection with a sender and a receiver link, and the server side of both, in memory."""

    def __init__(self, max_frame: int = 512) -> None:
        self.client, self.server = Connection(), Connection()
        self.client_io, self.server_io = Transport(), Transport(Transport.SERVER)
        self.server_io.max_frame_size = max_frame  # the client's transfers come in several frames
        self.client_io.bind(self.client)
        self.server_io.bind(self.server)
        self.client.open()
        session = self.client.session()
        session.open()
        self.sender = session.sender("to-broker")
        self.receiver = session.receiver("from-broker")
        self.sender.open()
        self.receiver.open()
        self.pump()
        self.server.open()
        self.server.session_head(0).open()
        link = self.server.link_head(0)
        while link:
            link.open()
            link = link.next(0)
        self.pump()
        self.broker_receiver = self.server.link_head(0)
        while self.broker_receiver.is_sender:
            self.broker_receiver = self.broker_receiver.next(0)
        self.broker_sender = self.broker_receiver.next(0) or self.server.link_head(0)
        assert self.broker_sender.is_sender

    def pump(self, limit: int | None = None) -> None:
        """Move the frames both ways; with `limit`, no more than that many bytes from the client."""
        left = limit
        while True:
            size = self.client_io.pending()
            if left is not None:
                size = min(size, left)
                left -= size
            if size > 0:
                self.server_io.push(self.client_io.peek(size))
                self.client_io.pop(size)
            back = self.server_io.pending()
            if back > 0:
                self.client_io.push(self.server_io.peek(back))
                self.server_io.pop(back)
            if size <= 0 and back <= 0:
                return


def _implementations(native_module: Any) -> list[tuple[str, Any, Any]]:
    bound = reference.bind(native_module)
    return [("python", reference.delivery_in, reference.settle_all),
            ("c", bound.delivery_in, bound.settle_all)]


def _senders(native_module: Any) -> list[tuple[str, Any]]:
    return [("python", reference.send_raw), ("c", reference.bind(native_module).send_raw)]


def _take(delivery_in: Any, payload: bytes, credit: int, target: int, cut: int | None) -> tuple[Any, ...]:
    """A transfer of `payload` from the client (its frames cut after `cut` bytes), taken in."""
    pair = Pair()
    pair.broker_receiver.flow(credit)
    pair.pump()
    delivery = pair.sender.delivery(b"t")
    pair.sender.send(payload)
    pair.sender.advance()
    pair.pump(cut)
    current = pair.broker_receiver.current
    if current is None:
        return ("nothing arrived",)
    got = delivery_in(pair.broker_receiver._impl, current._impl, target)
    pair.pump()
    return (got, pair.broker_receiver.credit, pair.sender.credit, pair.broker_receiver.current is current,
            delivery.remote_state)


@settings(max_examples=40, deadline=None)
@given(payload=st.binary(max_size=3000), credit=st.integers(1, 1200), target=st.sampled_from([0, 10, 1000]),
       cut=st.none() | st.integers(0, 4000))
def test_a_transfer_is_taken_in_as_the_reference_does(native, payload, credit, target, cut) -> None:
    outcomes = {name: _take(delivery_in, payload, credit, target, cut)
                for name, delivery_in, _ in _implementations(native)}
    assert outcomes["c"] == outcomes["python"]


def test_a_whole_transfer_gives_its_payload_and_tops_the_credit_up(native) -> None:
    for name, delivery_in, _ in _implementations(native):
        got, receiver_credit, sender_credit, same, _ = _take(delivery_in, b"x" * 2000, 400, 1000, None)
        assert (got, receiver_credit, sender_credit, same) == (b"x" * 2000, 1000, 1000, False), name


def test_a_transfer_still_arriving_is_left(native) -> None:
    for name, delivery_in, _ in _implementations(native):
        assert _take(delivery_in, b"y" * 3000, 10, 1000, 900)[0] is False, name


@settings(max_examples=20, deadline=None)
@given(tag=st.binary(max_size=32), outcome=st.sampled_from([None, Delivery.ACCEPTED, Delivery.RELEASED,
                                                            Delivery.MODIFIED, Delivery.REJECTED]),
       settle=st.booleans())
def test_a_disposition_is_read_as_the_reference_does(native, tag, outcome, settle) -> None:
    seen = {}
    for name, delivery_in, _ in _implementations(native):
        pair = Pair()
        pair.receiver.flow(1)
        pair.pump()
        sent = pair.broker_sender.delivery(tag)
        pair.broker_sender.send(b"m")
        pair.broker_sender.advance()
        pair.pump()
        received = pair.receiver.current
        if outcome is not None:
            received.update(outcome)
        if settle:
            received.settle()
        pair.pump()
        seen[name] = delivery_in(pair.broker_sender._impl, sent._impl, 1000)
    assert seen["c"] == seen["python"] == (outcome or 0, settle, tag)


def _settled(settle_all: Any, outcome: int, modified: tuple[bool, bool] | None) -> list[tuple[Any, ...]]:
    """Two client transfers settled by the broker with `outcome`; with outcome 0, two of the broker's
    deliveries settled by echoing the client's outcome (modified with these flags, else accepted)."""
    pair = Pair()
    if outcome:
        pair.broker_receiver.flow(10)
        pair.pump()
        sent = [pair.sender.delivery(tag) for tag in (b"a", b"b")]
        for _ in sent:
            pair.sender.send(b"m")
            pair.sender.advance()
        pair.pump()
        broker_side = []
        while pair.broker_receiver.current is not None:
            delivery = pair.broker_receiver.current
            reference.pn_link_advance(pair.broker_receiver._impl)
            broker_side.append(delivery._impl)
    else:
        pair.receiver.flow(10)
        pair.pump()
        broker_side = []
        for tag in (b"a", b"b"):
            delivery = pair.broker_sender.delivery(tag)
            pair.broker_sender.send(b"m")
            pair.broker_sender.advance()
            broker_side.append(delivery._impl)
        pair.pump()
        sent = []
        while pair.receiver.current is not None:
            delivery = pair.receiver.current
            if modified is None:
                delivery.update(Delivery.ACCEPTED)
            else:
                delivery.local.failed, delivery.local.undeliverable = modified
                delivery.update(Delivery.MODIFIED)
            pair.receiver.advance()
            sent.append(delivery)
        pair.pump()
    for delivery in broker_side:
        reference._LIB.pn_incref(delivery)
    settle_all(broker_side, outcome)
    pair.pump()
    return [(d.remote_state, d.settled, d.remote.failed, d.remote.undeliverable) for d in sent]


@pytest.mark.parametrize(("outcome", "modified"), [(Delivery.ACCEPTED, None), (Delivery.RELEASED, None),
                                                   (0, None), (0, (True, False)), (0, (False, True))])
def test_settlements_reach_the_client_as_the_references(native, outcome, modified) -> None:
    seen = {name: _settled(settle_all, outcome, modified) for name, _, settle_all in _implementations(native)}
    assert seen["c"] == seen["python"]
    expected = outcome or (Delivery.MODIFIED if modified else Delivery.ACCEPTED)
    assert [state for state, *_ in seen["c"]] == [expected, expected]
    assert all(settled for _, settled, *_ in seen["c"])
    if modified:
        assert [(failed, undeliverable) for *_, failed, undeliverable in seen["c"]] == [modified, modified]


@settings(max_examples=25, deadline=None)
@given(messages=st.lists(st.tuples(st.binary(max_size=32), st.binary(max_size=2000), st.booleans()),
                         max_size=4))
def test_deliveries_sent_reach_the_client_as_the_references(native, messages) -> None:
    seen = {}
    for name, send_raw in _senders(native):
        pair = Pair()
        pair.receiver.flow(10)
        pair.pump()
        for tag, payload, settled in messages:
            send_raw(pair.broker_sender._impl, tag, payload, settled)
        pair.pump()
        got = []
        while pair.receiver.current is not None:
            delivery = pair.receiver.current
            tag = compat.delivery_tag(delivery._impl)  # proton's own reads tags as UTF-8
            got.append((tag, pair.receiver.recv(delivery.pending) or b"", delivery.settled))
            pair.receiver.advance()
        seen[name] = got
    assert seen["c"] == seen["python"]
    assert seen["c"] == messages


def test_bad_arguments_are_the_callers_errors(native) -> None:
    bound = reference.bind(native)
    pair = Pair()
    pair.sender.delivery(b"t")
    link, delivery = pair.sender._impl, pair.sender.current._impl
    for args in [(delivery, delivery, 0), (link, link, 0), (link, b"x", 0), (None, delivery, 0)]:
        with pytest.raises(TypeError):
            bound.delivery_in(*args)
    with pytest.raises(ValueError):
        bound.delivery_in(link, delivery, -1)
    with pytest.raises(TypeError):
        bound.delivery_in(link, delivery)
    with pytest.raises(TypeError):  # every pointer is checked before anything is settled
        bound.settle_all([delivery, link], Delivery.ACCEPTED)
    assert not pair.sender.current.settled
    with pytest.raises(TypeError):
        bound.settle_all((delivery,), Delivery.ACCEPTED)
    with pytest.raises(TypeError):
        bound.send_raw(delivery, b"t", b"m", False)
    with pytest.raises(TypeError):
        bound.send_raw(link, "t", b"m", False)
