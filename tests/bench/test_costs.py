"""The cost guard: bench/costs.py's instruction counts against bench/costs-baseline.json.

A figure more than 10 % over its baseline fails, naming the figure, both counts and the baseline's commit.
Counts depend on the interpreter's build and on the AMQP codec (C, or pure Python where it was not built),
so a run on another interpreter or codec than the baseline's fails too, saying so (its counts would be
compared with numbers they cannot be compared with); the remedy either way is a commit that moves the
baseline with `bench/costs.py --update-baseline --why "..."`.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_costs", ROOT / "bench" / "costs.py")
costs = importlib.util.module_from_spec(_spec)
sys.modules["bench_costs"] = costs
_spec.loader.exec_module(costs)

REMEDY = ("if the change is wanted, move the baseline in its own commit: "
          "bench/costs.py --update-baseline --why \"what moved and why that is right\"")


def test_baseline_has_every_figure_with_a_reason():
    baseline = costs.load_baseline()
    assert set(baseline["figures"]) == set(costs.FIGURES)
    assert all(figure["instructions"] > 0 for figure in baseline["figures"].values())
    assert baseline["history"] and all(entry["why"].strip() for entry in baseline["history"])
    assert baseline["history"][-1]["commit"] == baseline["commit"]


def test_a_rise_names_the_figure_and_the_baseline():
    baseline = {"commit": "abc1234", "figures": {"engine.memory": {"instructions": 40_000},
                                                 "amqp.decode": {"instructions": 10_000}}}
    rises = costs.compare({"engine.memory": 44_001, "amqp.decode": 10_999}, baseline)
    assert rises == ["engine.memory: 44,001 instructions per operation, +10.0% over the baseline's 40,000 "
                     "(costs-baseline.json, commit abc1234)"]
    assert costs.compare({"engine.memory": 30_000}, baseline) == []  # a fall passes (and is worth a commit)


def test_dumps_map_to_the_workloads_between_their_marks():
    # dumps: before the first mark, workload a, between, workload b, and more after
    counts = [1_000_000, 50_000, 7, 9_000, 3]
    assert costs.per_operation([["a", 10], ["b", 3]], counts) == {"a": 5_000, "b": 3_000}
    with pytest.raises(SystemExit, match="dumps"):
        costs.per_operation([["a", 10], ["b", 3]], counts[:3])


@pytest.mark.slow
def test_no_figure_rose_more_than_ten_percent():
    baseline = costs.load_baseline()
    if baseline["interpreter"] != costs.interpreter():
        pytest.fail(f"bench/costs-baseline.json was counted on {baseline['interpreter']}, this is "
                    f"{costs.interpreter()}: instruction counts differ between interpreter builds, so they "
                    f"cannot be compared; record this interpreter's baseline in a commit ({REMEDY})")
    if baseline["codec"] != costs.codec():
        pytest.fail(f"bench/costs-baseline.json counted the {baseline['codec']} AMQP codec, this run "
                    f"would count the {costs.codec()} one: `make setup` builds the C one (a C compiler is "
                    "needed), and SBFED_PURE_PYTHON must not be set")
    assert shutil.which("valgrind"), "valgrind is missing: `make setup` installs it (ensure-valgrind.sh)"
    done = subprocess.run([sys.executable, "bench/costs.py", "--json"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f"costs.py exited {done.returncode}:\n{done.stdout}{done.stderr[-4000:]}"
    print(done.stdout)
    figures = json.loads(done.stdout.strip().splitlines()[-1])["figures"]
    assert set(figures) == set(costs.FIGURES)
    rises = costs.compare(figures, baseline)
    assert not rises, "\n".join([*rises, REMEDY])
