from __future__ import annotations

from datetime import timedelta

from local_broker.engine.clock import seconds


def test_a_span_is_its_seconds_and_the_remembered_ones_stay_few() -> None:
    assert seconds(timedelta.max) == timedelta.max.total_seconds()
    spans = [timedelta(milliseconds=n) for n in range(3000)]
    assert [seconds(s) for s in spans] == [n / 1000 for n in range(3000)]
    assert [seconds(s) for s in spans[:5]] == [0.0, 0.001, 0.002, 0.003, 0.004]  # asked again after a reset
    assert len(seconds.__self__) <= 1024  # type: ignore[attr-defined]
