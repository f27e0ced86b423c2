"""The `geo_replication` block: read, checked one problem a line, written back unchanged."""

from datetime import timedelta

import pytest

from topology import TopologyError, parse


def _geo(block):
    return parse({"namespaces": {"orders": {"geo_replication": block}}}).namespaces["orders"]


def test_defaults_primary_first_region_and_asynchronous_five_minutes():
    geo = _geo({"regions": ["westeurope", "northeurope"]}).geo_replication
    assert (geo.primary, geo.mode, geo.max_lag, geo.secondaries) == (
        "westeurope", "asynchronous", timedelta(minutes=5), ["northeurope"])


def test_round_trip():
    doc = {"namespaces": {"orders": {"geo_replication": {
        "regions": ["a", "b"], "primary": "b", "mode": "asynchronous", "max_lag": "PT10S"}}},
        "connections": {}, "tasks": []}
    assert parse(doc).to_dict() == doc
    sync = {"regions": ["a", "b"], "primary": "a", "mode": "synchronous"}
    assert _geo(sync).geo_replication.to_dict() == sync


def test_every_problem_one_line():
    with pytest.raises(TopologyError) as caught:
        _geo({"regions": ["a", "b"], "primary": "c", "mode": "synchronous", "max_lag": "PT1S", "lag": 1})
    assert caught.value.problems == [
        "topology: orders/geo_replication: lag: unknown key, allowed: regions, primary, mode, max_lag",
        "topology: orders/geo_replication: primary: 'c' is not one of the regions (a, b)",
        "topology: orders/geo_replication: max_lag: only asynchronous replication has a maximum lag",
    ]


@pytest.mark.parametrize("block, says", [
    ({"regions": ["a"]}, "at least two region names"),
    ({"regions": ["a", "a"]}, "a region is named twice"),
    ({"regions": ["a", "b"], "mode": "eventual"}, "is not a replication mode"),
    ({"regions": ["a", "b"], "max_lag": "PT0S"}, "must be longer than zero"),
    ({"regions": ["a", "b"], "max_lag": "soon"}, "not an ISO 8601 duration"),
])
def test_refused(block, says):
    with pytest.raises(TopologyError, match=says):
        _geo(block)
