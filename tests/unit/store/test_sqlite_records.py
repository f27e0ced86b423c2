"""A message row's record and content are written by hand (sqlite.py: cheaper than json's encoder walking
the list): they must be exactly the JSON the encoder gives, whatever the message holds."""

from __future__ import annotations

import json
import uuid

import pytest
from proton import int32, symbol

import local_broker.engine  # noqa: F401  (the engine before the store: they import each other)
from local_broker.engine.message import Message, MessageState
from local_broker.store.codec import encode_properties
from local_broker.store.sqlite import _content, _record


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


@pytest.mark.parametrize("fields", [
    {},
    {"message_id": 'ü"\\\n\x01'},
    {"message_id": symbol("a-symbol"), "session_id": "s", "time_to_live": 12.5},
    {"annotations": {"x-opt-a": int32(3), "x-opt-b": float("inf")}, "amqp_properties": {"user_id": b"ab"}},
    {"subject": "label", "scheduled_enqueue_time": 1_764_302_400.25},
])
@pytest.mark.parametrize("properties", [None, {}, {"a": 1, "b": "é", "c": None}, {"n": float("nan")},
                                        {"u": uuid.UUID(int=7), "i": int32(5)}])
def test_a_content_is_the_json_of_its_fields(fields: dict, properties: dict | None) -> None:
    m = Message(b"body", {}, **fields)
    c = m.content
    c.enqueued_sequence_number, c.hop_count = 2**40 + 3, 1
    expected = [c.message_id, c.enqueued_sequence_number, 1, encode_properties(properties)]
    others = [c.correlation_id, c.session_id, c.reply_to_session_id, c.partition_key, c.via_partition_key,
              c.subject, c.to, c.reply_to, c.content_type, c.time_to_live, c.scheduled_enqueue_time,
              c.dead_letter_source, c.partition_id, encode_properties(c.annotations),
              encode_properties(c.amqp_properties)]
    if any(v is not None for v in others):
        expected.append(others)
    assert _content(c, properties) == _json(expected)


@pytest.mark.parametrize("lock", [(None, None), (1_764_302_400.123456, uuid.UUID(int=2**127 + 5).bytes)])
@pytest.mark.parametrize("expires_at", [None, 1_764_302_400.5 + 86_400 * 365])
@pytest.mark.parametrize("properties", [None, {}, {"a": [1, "x"]}])
def test_a_record_is_the_json_of_its_values(lock: tuple, expires_at: float | None,
                                            properties: dict | None) -> None:
    locked_until, token = lock
    content = _content(Message(b"", message_id="m").content, {})
    record = _record(3, MessageState.DEFERRED, locked_until, token, 1_764_302_400.000001, expires_at, 1100,
                     properties, content)
    assert record == _json([
        3, 1, None if locked_until is None else round(locked_until * 1e6),
        None if token is None else token.hex(),
        1_764_302_400_000_001, None if expires_at is None else round(expires_at * 1e6), 1100, properties,
        json.loads(content),
    ])
    assert _record(0, 0, None, None, 1.0, None, 0, None, None).endswith(",null]")
