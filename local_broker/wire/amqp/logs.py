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
