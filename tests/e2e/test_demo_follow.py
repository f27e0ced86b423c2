"""`sbfed demo` runs `sbfed reconcile --follow` beside the active-passive drill, as `make demo` does: a real
drill, the follow query in its own JVM while the drill writes its audit logs, stopped by SIGTERM after it,
its final counts set beside the batch reconciliation's and agreeing with them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_the_demo_follows_the_active_passive_drill_and_agrees_with_the_batch_job(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "sbfed", "demo", "--patterns", "active-passive", "--messages",
                          "160", "--outage", "6", "--no-wait", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "[follow] $ sbfed reconcile --log=primary=" in out and "--follow --checkpoint" in out
    # the drill's end is reported either way; on a slow machine no verdict may be final by then
    assert re.search(r"^\[follow\] (final before the drill ended: final \d+|no verdict was final before)",
                     out, re.M)
    stopped = re.search(r"^\[follow\] stopped: final (\d+) \(ok (\d+), late (\d+), missing (\d+)", out, re.M)
    assert stopped, out
    final, ok, late, missing = map(int, stopped.groups())
    compared = re.search(r"^  follow: final (\d+) .*; batch missing (\d+); agrees with the batch job$", out,
                         re.M)
    assert compared and int(compared.group(1)) == final, out

    batch = json.loads((tmp_path / "active-passive" / "reconcile-replica" / "summary.json").read_text())
    totals = [c["totals"] for c in batch["comparisons"]]
    assert sum(t["missing"] for t in totals) == missing == int(compared.group(2)) == 0
    # the follow query judged most of the drill (all but its last lookahead), each key as the batch job did
    assert 0 < final <= sum(t[s] for t in totals for s in ("ok", "late", "pending", "missing", "expired",
                                                           "orphan", "original"))
    assert ok + late <= sum(t["ok"] + t["late"] for t in totals)
    statuses = list((tmp_path / "active-passive" / "follow-replica" / "out" / "status").glob("*.json"))
    assert [json.loads(p.read_text())["target"] for p in statuses] == ["secondary"]
