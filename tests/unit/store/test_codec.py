"""The store's tagged encoding keeps value types through JSON."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from proton import Described, byte, float32, int32, short, symbol, ubyte, uint, ulong, ushort

from local_broker.engine import EntityStatus, QueueProperties, RuleProperties, SqlFilter
from local_broker.store.codec import (
    decode_properties,
    decode_value,
    dumps,
    encode_properties,
    encode_value,
    loads,
)


@pytest.mark.parametrize(
    "value",
    [
        "s",
        0,
        2**70,
        -1.5,
        True,
        None,
        b"\x00\xff",
        datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        timedelta(days=3, microseconds=7),
        uuid.UUID(int=12345),
        [1, "a", b"b", [None]],
        {"k": {"n": timedelta(seconds=1)}},
        EntityStatus.SEND_DISABLED,
        QueueProperties("q", lock_duration=timedelta(seconds=7)),
        RuleProperties("r", SqlFilter("a = @p", {"@p": 1.5})),
        int32(-7), uint(7), ulong(2**63), short(-3), ushort(3), byte(-1), ubyte(255), float32(1.5),
    ],
)
def test_round_trip_keeps_type_and_value(value) -> None:
    back = decode_value(loads(dumps(encode_value(value))))
    assert back == value and type(back) is type(value)


def test_non_finite_floats() -> None:
    for value in (math.inf, -math.inf):
        assert decode_value(loads(dumps(encode_value(value)))) == value
    assert math.isnan(decode_value(loads(dumps(encode_value(math.nan)))))


def test_plain_properties_pass_through_untouched() -> None:
    props = {"a": 1, "b": "x", "c": None, "d": 1.5, "e": False}
    assert encode_properties(props) is props
    mixed = {"a": 1, "b": b"x"}
    assert decode_properties(loads(dumps(encode_properties(mixed)))) == mixed


def test_amqp_number_properties_keep_their_type() -> None:
    """An int32 application property must go back to its receiver as an int32 after a restart."""
    props = {"i": int32(7), "u": uint(1), "plain": 2}
    back = decode_properties(loads(dumps(encode_properties(props))))
    assert back == props and [type(v) for v in back.values()] == [int32, uint, int]


def test_described_properties_keep_their_descriptor() -> None:
    """.NET sends TimeSpan, Uri and DateTimeOffset application properties as described values."""
    for value in (Described(symbol("com.microsoft:timespan"), 10_000_000), Described(ulong(0x137), "x")):
        back = decode_value(loads(dumps(encode_value(value))))
        assert back == value and type(back.descriptor) is type(value.descriptor)


def test_str_subclass_is_kept_as_str() -> None:
    class Symbol(str):
        pass

    assert decode_value(loads(dumps(encode_value(Symbol("x-opt"))))) == "x-opt"


def test_unknown_type_is_refused() -> None:
    with pytest.raises(TypeError):
        encode_value(object())
