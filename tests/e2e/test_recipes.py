"""The recipes end to end, each as its drill (patterns/drills/recipes.py): the topology generated and applied
with `sbfed topology apply` to namespaces of `sbfed broker serve`, `function_app.py` run by `sbfed functions
run`, a mixed workload published, the namespace the recipe copies to taken down and brought back, then
`sbfed reconcile` over the audit logs. The assertions are the recipes' promises, checked on the audit
records (what each namespace enqueued and each consumer processed) and on reconciliation's summary.

One broker process serves the module: each recipe has namespaces of its own in it, so no test sees
another's entities or messages. Reconciliation runs in this process for three recipes (one Spark JVM for
the module) and as the `sbfed reconcile` command for routing (its own JVM: about 20 s more on the shared
2-core machine, so one recipe shows the command works and the others reuse the JVM)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from patterns.drills.broker import BrokerProcess
from patterns.drills.metrics import hops, parse_time
from patterns.drills.recipes import RECIPES
from patterns.drills.summary import format_summary
from sbfed.demo import reconcile, reconcile_commands, reconcile_out
from tests.e2e.drill_records import between, drill, of

pytestmark = pytest.mark.slow
SETTINGS = {"messages": 120, "outage": 4.0, "warmup": 3.0, "probe_interval": 2.0}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess([name for recipe in RECIPES for name in recipe.default_namespaces],
                            tmp_path_factory.mktemp("broker"))
    process.start()
    yield process.ready_path
    process.stop()


def run(tmp_path, broker, recipe):
    result, records = drill(tmp_path, recipe, broker_file=broker, **SETTINGS)
    assert result.summary["passed"], result.summary["problems"]
    assert result.summary["pattern_details"]["violations"] == []
    printed = format_summary(result.summary)  # what `sbfed drill` prints: the outage and what went where
    assert f"outage of {result.summary['down']}" in printed and "processed by" in printed
    return result, records


def reconciled(result, tmp_path, *, command=False):
    """`sbfed reconcile` in the mode that fits the recipe (one run), in this process or (`command`) as the
    command a person runs; it must pass with nothing missing."""
    settings = result.scenario.drill.settings
    if command:
        ((mode, argv),) = reconcile_commands(settings).items()
        done = subprocess.run([sys.executable, "-m", "sbfed", "reconcile", *argv], capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert f"reconcile ({mode}): PASS" in done.stdout, done.stdout[-3000:]  # its one-screen summary
        out = reconcile_out(settings, mode)
    else:
        (run_,) = reconcile(settings, tmp_path / "reconcile.log")
        assert run_.verdict == "pass", (tmp_path / "reconcile.log").read_text()[-3000:]
        mode, out = run_.mode, run_.out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"] == "pass"
    for comparison in summary["comparisons"]:
        totals = comparison["totals"]
        assert totals["missing"] == totals["pending"] == totals["orphan"] == 0, comparison
        assert totals["ok"] + totals["late"] == totals["expected"] == len(result.scenario.workload)
    return mode, summary["comparisons"]


def enqueues(records, namespace):
    """How many times each message was enqueued in a namespace's audited topic (a redelivery to the audit
    tap has the same sequence number and is not a second enqueue)."""
    return Counter(m for m, _ in {(r["message_id"], r["sequence_number"])
                                  for r in of(records, "enqueued", namespace=namespace)})


def processed(records, processor):
    return Counter(r["message_id"] for r in of(records, "processed", processor=processor))


def assert_no_loop(records, sources):
    """A copy makes one hop, from a source; nothing is copied back into a source."""
    for record in of(records, "enqueued"):
        if record["namespace"] in sources:
            assert hops(record) == 0, f"{record['message_id']} came back to {record['namespace']}"
        else:
            assert hops(record) == 1, f"{record['message_id']} made {hops(record)} hops"
            assert record["repl_source"].split("/")[0] in sources


def assert_caught_up(result, records, namespace):
    """The outage was real: messages published while `namespace` was down reached it after it came back."""
    fault, restored = result.timeline.fault_at, result.timeline.restored_at
    during = {r["message_id"] for r in of(records, "sent") if between(r, fault, restored)}
    late = [r for r in of(records, "enqueued", namespace=namespace)
            if r["message_id"] in during and parse_time(r["enqueued_time_utc"]) >= restored]
    assert during and late, f"nothing published during the outage reached {namespace} after it"


def test_latency_optimization_every_hub_gets_every_event_once_and_nothing_loops(tmp_path, broker):
    result, records = run(tmp_path, broker, "latency")
    origin, *hubs = result.scenario.drill.names
    sent = Counter(r["message_id"] for r in of(records, "sent", namespace=origin))
    assert sum(sent.values()) == SETTINGS["messages"]
    assert enqueues(records, origin) == sent
    for hub in hubs:
        assert enqueues(records, hub) == sent, f"{hub} did not enqueue every event exactly once"
        assert processed(records, f"{hub}/consumer") == sent
        assert {r["repl_source"] for r in of(records, "enqueued", namespace=hub)} == {f"{origin}/events"}
    assert_no_loop(records, {origin})
    assert_caught_up(result, records, result.summary["down"])
    mode, comparisons = reconciled(result, tmp_path)
    assert mode == "replica" and sorted(c["target"] for c in comparisons) == sorted(hubs)
    assert all(c["totals"]["dup_extra"] == 0 for c in comparisons)  # duplicate detection on every hub


def test_splitting_and_routing_sends_each_order_only_where_its_filter_says(tmp_path, broker):
    result, records = run(tmp_path, broker, "routing")
    source, eu, us = result.scenario.drill.names
    sent = {r["message_id"] for r in of(records, "sent", namespace=source)}
    properties = {m: result.scenario.workload[m].properties for m in sent}
    # the filters, read independently: region = 'eu' / region = 'us' OR priority > 7, each TRUE only when
    # the properties it compares are there and not null (else UNKNOWN, which selects nothing)
    to_eu = {m for m, p in properties.items() if p.get("region") == "eu"}
    to_us = {m for m, p in properties.items()
             if p.get("region") == "us" or (p.get("priority") is not None and p["priority"] > 7)}
    unrouted = sent - to_eu - to_us
    both = to_eu & to_us
    assert to_eu and to_us and unrouted and both, "the workload must exercise every case"
    # orders for which a route is UNKNOWN and none TRUE: a plain NOT (route OR route) lost them
    no_region = {m for m, p in properties.items() if p.get("region") is None}
    no_priority = {m for m, p in properties.items() if "priority" not in p}
    null_region = {m for m, p in properties.items() if "region" in p and p["region"] is None}
    lacking = {"no region, unrouted": no_region & unrouted,
               "no priority, unrouted": (no_priority - no_region) & unrouted,
               "no region, priority > 7": no_region & to_us, "null region": null_region & unrouted}
    assert all(lacking.values()), lacking
    assert set(enqueues(records, eu)) == to_eu and set(enqueues(records, us)) == to_us
    assert max([*enqueues(records, eu).values(), *enqueues(records, us).values()]) == 1
    assert processed(records, f"{eu}/consumer") == Counter(to_eu)
    assert processed(records, f"{us}/consumer") == Counter(to_us)
    assert processed(records, f"{source}/unrouted") == Counter(unrouted)  # accounted for, in the source
    assert_no_loop(records, {source})
    assert_caught_up(result, records, eu)
    mode, (comparison,) = reconciled(result, tmp_path, command=True)
    # exactly-once over every consumer: an order routed to both targets is its only duplicate
    assert mode == "exactly-once" and comparison["totals"]["dup_extra"] == len(both)


def test_consolidation_lands_every_shops_orders_once_as_v2_with_the_shop_in_the_stamps(tmp_path, broker):
    result, records = run(tmp_path, broker, "consolidation")
    *shops, central = result.scenario.drill.names
    workload = result.scenario.workload
    sent = {r["message_id"]: r["namespace"] for r in of(records, "sent")}
    assert set(Counter(sent.values())) == set(shops)
    invalid = {m for m in sent if not workload[m].valid}
    assert invalid and len(invalid) == len(sent) // 10
    # every valid order once in the central topic, each stamped with the shop it came from
    assert enqueues(records, central) == Counter(set(sent) - invalid)
    for record in of(records, "enqueued", namespace=central):
        assert record["repl_source"] == f"{sent[record['message_id']]}/events"
    normalized = of(records, "processed", processor=f"{central}/consumer")
    assert Counter(r["message_id"] for r in normalized) == Counter(set(sent) - invalid)
    assert all(r["repl_source"].startswith(f"{sent[r['message_id']]}/") for r in normalized)
    # the invalid ones in the central quarantine queue, once each (their reasons checked by the drill)
    assert processed(records, f"{central}/events-quarantine") == Counter(invalid)
    for shop in shops:
        assert enqueues(records, shop) == Counter(m for m, s in sent.items() if s == shop)
    assert_no_loop(records, set(shops))
    assert_caught_up(result, records, central)
    mode, (comparison,) = reconciled(result, tmp_path)
    assert mode == "exactly-once" and comparison["totals"]["dup_extra"] == 0


def test_editing_trims_validates_and_enriches_and_quarantines_what_is_not_json(tmp_path, broker):
    result, records = run(tmp_path, broker, "editing")
    raw, clean = result.scenario.drill.names
    workload = result.scenario.workload
    sent = {r["message_id"] for r in of(records, "sent", namespace=raw)}
    invalid = {m for m in sent if not workload[m].valid}
    assert invalid and len(invalid) == len(sent) // 8
    assert enqueues(records, raw) == Counter(sent)
    assert enqueues(records, clean) == Counter(sent - invalid)
    assert processed(records, f"{clean}/consumer") == Counter(sent - invalid)
    assert processed(records, f"{clean}/events-quarantine") == Counter(invalid)
    assert_no_loop(records, {raw})
    assert_caught_up(result, records, clean)
    mode, (comparison,) = reconciled(result, tmp_path)
    assert mode == "exactly-once" and comparison["totals"]["dup_extra"] == 0

