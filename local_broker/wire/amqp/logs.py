"""Structured log lines: `event key=value ...`, one per connection open/close and per error."""

from __future__ import annotations

import logging
from typing import Any


def log_event(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, "%s %s", event, " ".join(f"{k}={_quote(v)}" for k, v in fields.items()))


def _quote(value: Any) -> str:
    text = str(value)
    return f'"{text}"' if not text or " " in text or "=" in text else text


class _ProtonSocketNoise(logging.Filter):
    """proton logs a peer's abrupt disconnect ("Couldn't send/recv") as an error; it is routine."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Couldn't send", "Couldn't recv"))


def quiet_proton_socket_noise() -> None:
    logging.getLogger("proton").addFilter(_ProtonSocketNoise())
