"""Small helpers to make messages in engine tests."""

from __future__ import annotations

from local_broker.engine import Message


def msg(body: bytes | str = b"x", **kwargs) -> Message:
    if isinstance(body, str):
        body = body.encode()
    return Message(body, **kwargs)


def ids(messages: list[Message]) -> list[str | None]:
    return [m.message_id for m in messages]
