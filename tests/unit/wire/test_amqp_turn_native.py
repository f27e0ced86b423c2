"""The C functions of the settlement turn against their pure-Python references: the frame scan
(`_speedups.scan_frames`, `compat._scan_frames`) whatever the reads cut the stream into, the lock token
(`lock_token`, `uuid.UUID(bytes_le=...)`) and a delivery's head (`delivery_head`,
`messages._delivery_head`): the same result for any input, or declined and the reference's outcome."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from local_broker.wire.amqp import compat, messages
from tests.unit.wire.test_amqp_transfer_formats import CONVERSATION, FLOW, attach, frame, transfer

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HEAD = compat.IncomingFrames.PERFORMATIVE_BYTES
DISPOSITION = 0x15

_frames = st.one_of(
    st.builds(attach, st.integers(0, 3), st.text(max_size=20), st.integers(0, 300), st.booleans()),
    st.builds(transfer, st.integers(0, 3), st.integers(0, 300), st.binary(max_size=32),
              st.integers(0, 2**32 - 1), st.binary(max_size=700)),
    st.builds(lambda channel: frame(channel, FLOW, [0, 100]), st.integers(0, 3)),
    st.builds(lambda first: frame(0, DISPOSITION, [True, first, first, True]), st.integers(0, 2**31)),
    st.just(struct.pack(">IBBH", 8, 2, 0, 0)),  # a heartbeat
    st.just(b"AMQP\x00\x01\x00\x00"),
    st.binary(min_size=8, max_size=40),  # not a frame: an odd size, type or descriptor
)


def _agree(native, data: bytes, skip: int) -> None:
    found = native.scan_frames(data, skip, HEAD)
    assert found == compat._scan_frames(data, skip, HEAD)
    assert found == native.scan_frames(memoryview(data), skip, HEAD)  # any buffer, as the reference


@SETTINGS
@given(st.lists(_frames, max_size=8), st.integers(0, 2000), st.data())
def test_the_scan_finds_the_reference_heads_in_any_cut(native, frames, skip, data) -> None:
    stream = b"".join(frames)
    cut = data.draw(st.integers(0, len(stream)))
    _agree(native, stream[:cut], skip)
    _agree(native, stream[cut:], skip)


@SETTINGS
@given(st.binary(max_size=600), st.integers(0, 2**40))
def test_random_bytes_scan_as_the_reference(native, raw, skip) -> None:
    _agree(native, raw, skip)


def test_the_conversation_scans_to_its_begin_attach_and_transfer_heads(native) -> None:
    end, skip, heads = native.scan_frames(CONVERSATION, 0, HEAD)
    assert (end, skip) == (len(CONVERSATION), 0)
    codes = [CONVERSATION[at + 10] for at, _ in heads]  # doff 2: the descriptor's code at byte 10
    assert codes == [0x12, 0x12, 0x12, 0x14, 0x14, 0x14]  # the heartbeat and the flow are not read
    assert [head for at, head in heads][4] == HEAD  # the 70 kB batch: its head alone


def test_bad_arguments_are_the_callers_errors(native) -> None:
    with pytest.raises(TypeError):
        native.scan_frames("text", 0, HEAD)
    with pytest.raises(TypeError):
        native.scan_frames(b"", 0)
    with pytest.raises(ValueError):
        native.scan_frames(b"", -1, HEAD)
    with pytest.raises(OverflowError):
        native.scan_frames(b"", 2**80, HEAD)


@SETTINGS
@given(st.binary(min_size=16, max_size=16))
def test_lock_tokens_are_the_references(native, tag) -> None:
    token = native.lock_token(tag)
    reference = uuid.UUID(bytes_le=tag)
    assert type(token) is uuid.UUID and token == reference and token.bytes_le == tag
    assert token.is_safe is reference.is_safe and hash(token) == hash(reference)


def _error_of(call) -> type[BaseException] | None:
    try:
        call()
    except BaseException as exc:  # uuid asserts a bytes_le is bytes: AssertionError is its answer
        return type(exc)
    return None


@pytest.mark.parametrize("tag", [b"", b"\x00" * 15, b"\x00" * 17, bytearray(16), "x" * 16])
def test_other_tags_are_declined_and_get_the_references_error(native, monkeypatch, tag) -> None:
    assert native.lock_token(tag) is NotImplemented
    monkeypatch.setattr(messages.values, "_native", native)
    reference = _error_of(lambda: uuid.UUID(bytes_le=tag))
    assert reference is not None and _error_of(lambda: messages.lock_token_of(tag)) is reference


_longs = st.integers(-(2**63), 2**63 - 1)
_times = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(1e9, 2e9), st.integers(0, 2**40))
_heads = st.tuples(st.none() | st.integers(-5, 2**40), st.integers(-5, 2**33) | st.just(True),
                   _longs | st.integers(), _times, _longs, st.none() | _times)


def _head_outcome(call) -> bytes | type[BaseException]:
    try:
        return call()
    except Exception as exc:
        return type(exc)


@SETTINGS
@given(_heads)
def test_delivery_heads_are_the_references_bytes(native, args) -> None:
    reference = _head_outcome(lambda: messages._delivery_head(*args))
    found = native.delivery_head(*args)
    if found is not NotImplemented:
        assert found == reference
    else:  # declined: the caller gets the reference's bytes or error
        assert _head_outcome(lambda: messages.delivery_head(*args)) == reference


def test_a_common_delivery_head_is_not_declined(native) -> None:
    args = (60_000, 0, 12, 1_700_000_000.5, 12, 1_700_000_060.25)
    assert native.delivery_head(*args) == messages._delivery_head(*args)
    assert native.delivery_head(None, 300, 2**40, 0.0005, -129, None) == messages._delivery_head(
        None, 300, 2**40, 0.0005, -129, None)  # ties round to even, as Python's round
