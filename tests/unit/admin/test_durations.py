"""ISO 8601 durations and timestamps as the management wire writes them."""

from datetime import UTC, datetime, timedelta

import pytest

from local_broker.engine import TIMESPAN_MAX
from local_broker.wire.admin.durations import (
    TIMESPAN_MAX_TEXT,
    format_duration,
    format_timestamp,
    parse_duration,
    parse_timestamp,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("PT1M", timedelta(minutes=1)),
    ("PT30S", timedelta(seconds=30)),
    ("P14D", timedelta(days=14)),
    ("PT10M", timedelta(minutes=10)),
    ("P1DT2H3M4.25S", timedelta(days=1, hours=2, minutes=3, seconds=4.25)),
    ("PT0.5S", timedelta(milliseconds=500)),
    ("PT0.0000001S", timedelta(0)),  # one .NET tick rounds to zero microseconds
    ("PT0S", timedelta(0)),
    ("P1W", timedelta(days=7)),
    ("P1Y2M", timedelta(days=365 + 60)),  # XmlConvert's fixed-length years and months
    ("-PT5S", timedelta(seconds=-5)),
])
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", [
    TIMESPAN_MAX_TEXT,
    "P10675199DT2H48M5.477539S",  # what the SDK sends back after reading MaxValue
    "P10675199DT2H48M5S",
])
def test_timespan_max_and_its_roundings_read_as_infinite(text):
    assert parse_duration(text) == TIMESPAN_MAX


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "1M", "PT1X", "P1.5D", "PTM", "P10675300D",
                                  "P" + "9" * 30 + "D"])
def test_parse_duration_rejects_non_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(("value", "text"), [
    (timedelta(minutes=1), "PT1M"),
    (timedelta(days=14), "P14D"),
    (timedelta(seconds=30), "PT30S"),
    (timedelta(days=1, hours=1), "P1DT1H"),
    (timedelta(seconds=5, microseconds=250000), "PT5.25S"),
    (timedelta(0), "PT0S"),
    (timedelta(seconds=-1), "-PT1S"),
    (TIMESPAN_MAX, TIMESPAN_MAX_TEXT),
])
def test_format_duration(value, text):
    assert format_duration(value) == text
    assert parse_duration(text) == value


def test_timestamps():
    assert format_timestamp(None) == "0001-01-01T00:00:00Z"
    assert format_timestamp(datetime(2024, 1, 1, tzinfo=UTC)) == "2024-01-01T00:00:00Z"
    assert format_timestamp(datetime(2024, 1, 1, 0, 0, 0, 123000, UTC)) == "2024-01-01T00:00:00.123000Z"
    assert parse_timestamp("2024-01-01T00:00:00Z") == datetime(2024, 1, 1, tzinfo=UTC)
    assert parse_timestamp("2024-01-01T02:00:00+02:00") == datetime(2024, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_timestamp("yesterday")
