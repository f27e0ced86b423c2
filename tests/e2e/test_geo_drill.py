"""The Geo-Replication drill end to end: `sbfed broker serve` with a namespace replicated asynchronously to a
far region, the region outage, a forced promotion during it and a planned one after; what was lost is what
the broker's forced promotion listed, nothing else (checked on the audit records, not on the verdict)."""

from __future__ import annotations

import pytest

from tests.e2e.drill_records import drill, of

pytestmark = pytest.mark.slow


def test_geo_replication_forced_loses_only_what_the_broker_listed_and_planned_nothing(tmp_path):
    result, records = drill(tmp_path, "geo-replication-async", messages=120)
    forced, planned = result.summary["pattern_details"]["promotions"]
    assert (forced["promotion"], forced["primary"], planned["promotion"], planned["primary"]) == (
        "forced", "north", "planned", "west")
    assert planned["lost_operations"] == 0
    sent = {r["message_id"] for r in of(records, "sent")}
    processed = {r["message_id"] for r in of(records, "processed")}
    listed = set(result.scenario.lost_by_promotion())
    assert listed <= sent  # the broker lists acknowledged sends it lost, no others
    assert sent - processed <= listed  # and nothing else is missing
    assert result.summary["processed_twice"] == 0
    assert result.summary["time_to_fail_over_s"]["consumer"] is not None
    assert result.summary["passed"], result.summary["problems"]
