"""A namespace on a fake clock, and small helpers to make messages."""

from __future__ import annotations

from datetime import timedelta

import pytest

from local_broker.engine import FakeClock, Namespace, QueueProperties


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ns(clock: FakeClock) -> Namespace:
    return Namespace(clock=clock)


@pytest.fixture
def queue(ns: Namespace) -> str:
    ns.create_queue(QueueProperties("q1", lock_duration=timedelta(seconds=30), max_delivery_count=3))
    return "q1"
