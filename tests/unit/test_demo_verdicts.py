"""What `sbfed demo` prints of each reconciliation: its verdict and counts, why it did not pass, never a
Python None (a reconciliation that did not run, a drill without replicas)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from patterns.drills.catalog import drill_settings
from sbfed.demo import PATTERNS, Reconciliation, _read_reconciliation, reconcile_commands, reconcile_modes
from sbfed.demo_follow import FollowCounts, FollowRun


def test_a_reconciliation_that_proved_nothing_says_so_and_fails_the_demo(tmp_path: Path) -> None:
    out = tmp_path / "reconcile-replica"
    out.mkdir()
    totals = {"missing": 0, "dup_extra": 0, "orphan": 0, "original": 0}
    (out / "summary.json").write_text(json.dumps({
        "verdict": "no data", "failures": [], "no_data": ["log secondary (/x): no records"],
        "comparisons": [{"totals": totals}]}))
    result = _read_reconciliation("active-passive", "replica", out, tmp_path / "reconcile.log")
    assert not result.passed
    assert result.line() == ("replica: NO DATA, missing 0, duplicate copies 0, orphans 0, originals at the "
                             "target 0\n    log secondary (/x): no records")


def test_a_reconciliation_that_did_not_run_prints_no_none(tmp_path: Path) -> None:
    result = _read_reconciliation("spillover", "exactly-once", tmp_path / "nothing", tmp_path / "r.log")
    assert result == Reconciliation("spillover", "exactly-once", tmp_path / "nothing", "did not run", None,
                                     None, None, None, None, tmp_path / "r.log")
    assert result.line() == f"exactly-once: DID NOT RUN, see {tmp_path / 'r.log'}"
    follow = FollowRun(tmp_path / "follow", [], [])
    follow.outcome, follow.final = "stopped", FollowCounts(3, 3, 0, 0, 0, 0, 0, 5, 1)
    line, agrees = follow.compare(None)
    assert agrees and "the batch job did not run" in line and not re.search(r"\bNone\b", line)


def test_every_demo_drill_has_its_reconciliation(tmp_path: Path) -> None:
    """The demo's default drills, Geo-Replication's one namespace among them, each get their modes."""
    for pattern in PATTERNS:
        modes = reconcile_modes(drill_settings(pattern, tmp_path / pattern))
        assert modes, pattern
    geo = reconcile_commands(drill_settings("geo-replication", tmp_path / "geo"))
    assert list(geo) == ["exactly-once"]
    assert f"--log=geo={tmp_path}/geo/audit/namespace=geo" in geo["exactly-once"]
