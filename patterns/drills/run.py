"""One drill from start to finish: the broker process, the pattern applied by `sbfed topology apply`, the
Functions host process, the pattern's clients, the outage through the control API, the wait until every
message has been handled, and the summary (`drill-summary.json`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patterns.building import connection_setting
from patterns.drills.broker import BrokerError, BrokerNamespace, BrokerProcess, read_ready_file
from patterns.drills.catalog import SCENARIOS
from patterns.drills.drill import Drill, DrillSettings, Timeline
from patterns.drills.functions import FunctionsHostProcess
from patterns.drills.metrics import read_records
from patterns.drills.processes import run_sbfed
from patterns.drills.scenario import Scenario, Step
from patterns.drills.summary import summarize
from patterns.failover import FailoverPolicy
from topology import Topology, dump

AUDIT_SINK_SETTING = "SBFED_AUDIT_SINK"
QUIET_SECONDS = 3.0  # after everything was processed: time for a late duplicate or bounce to show up


@dataclass
class DrillResult:
    summary: dict[str, Any]
    scenario: Scenario
    timeline: Timeline
    summary_path: Path


def prepare_topology(scenario: Scenario, names: tuple[str, ...], settings: DrillSettings) -> Topology:
    """The pattern's topology with the drill's lock duration on every queue and subscription, so messages
    locked by a client when its connection is cut come back within the drill."""
    topology = scenario.topology(names, str(settings.out / "audit"))
    for namespace in topology.namespaces.values():
        for queue in namespace.queues:
            queue.properties.setdefault("lock_duration", settings.lock_duration)
        for topic in namespace.topics:
            for subscription in topic.subscriptions:
                subscription.properties.setdefault("lock_duration", settings.lock_duration)
    return topology


def apply_pattern(topology_file: Path, namespaces: dict[str, BrokerNamespace], log: Path) -> None:
    """`sbfed topology apply`, run as a person runs it against their namespaces: each one's admin connection
    string in the environment variable named after its connection setting (`PRIMARY`, ...), HTTPS verified
    with the broker's certificate."""
    certificates = {ns.cert_path for ns in namespaces.values()}
    if len(certificates) != 1:
        raise BrokerError(f"the namespaces are served with {len(certificates)} certificates; "
                          "a drill's namespaces come from one broker")
    run_sbfed("sbfed topology apply",
              ["topology", "apply", "--topology", str(topology_file), "--verify", certificates.pop()], log,
              env={connection_setting(n): ns.admin_connection_string for n, ns in namespaces.items()})


def clear_previous(out: Path) -> None:
    """Remove what an earlier drill wrote to `out` (its audit records would be counted again); anything
    else in the directory is left alone."""
    for directory in ("audit", "broker-data", *(p.name for p in out.glob("reconcile-*"))):
        shutil.rmtree(out / directory, ignore_errors=True)
    for name in ("drill-summary.json", "topology.yaml", "broker-topology.yaml", "broker-ready.json"):
        (out / name).unlink(missing_ok=True)


def run_drill(settings: DrillSettings, progress: Callable[[str], None] | None = None,
              cleared: Callable[[], None] | None = None,
              ready: Callable[[], None] | None = None) -> DrillResult:
    """Run one drill; every process and client it started is stopped however it ends. `cleared` is called
    once an earlier drill's output is gone, before anything starts, and `ready` once the pattern is applied
    and the Functions host runs, before the clients start (sbfed demo starts its follow query, then waits
    for it to run)."""
    report = progress or _print
    out = settings.out
    clear_previous(out)
    if cleared:
        cleared()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        served = SCENARIOS[settings.pattern].broker_namespaces(settings.namespaces)
        if settings.broker_file:
            namespaces = read_ready_file(settings.broker_file)
        else:
            broker = BrokerProcess(served, out, in_memory=settings.in_memory,
                                   topology=SCENARIOS[settings.pattern].broker_topology(served))
            stack.callback(broker.stop)
            namespaces = broker.start()
        missing = [n for n in served if n not in namespaces]
        if missing:
            raise BrokerError(f"the broker hosts {', '.join(namespaces)}, not {', '.join(missing)}")
        drill = Drill(settings, settings.namespaces, namespaces, out / "audit",
                      policy=FailoverPolicy(probe_interval=settings.probe_interval))
        scenario = SCENARIOS[settings.pattern](drill)
        topology = prepare_topology(scenario, drill.names, settings)
        dump(topology, out / "topology.yaml")
        report(f"{settings.pattern}: broker up ({', '.join(drill.names)}); applying the pattern")
        apply_pattern(out / "topology.yaml", {n: namespaces[n] for n in served},
                      out / "logs" / "apply.log")
        if topology.tasks:  # Geo-Replication has none: the broker replicates
            host_settings = {connection_setting(n): namespaces[n].connection_string for n in served}
            host_settings.update(scenario.services(stack))
            host = FunctionsHostProcess(out / "topology.yaml",
                                        {**host_settings, AUDIT_SINK_SETTING: str(out / "audit")},
                                        out / "logs" / "functions-host.log")
            stack.callback(host.stop)
            host.start()
            drill.functions_host = host
        if ready:
            ready()
        report(f"{settings.pattern}: Functions host running {len(topology.tasks)} task(s); "
               "starting the clients")
        stack.callback(drill.close)
        stack.callback(scenario.stop)
        timeline = _run_timeline(drill, scenario, report)
    timeline.finished_at = dt.datetime.now(dt.UTC)
    summary = summarize(settings, scenario, timeline, read_records(out / "audit"))
    summary_path = out / "drill-summary.json"
    summary_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return DrillResult(summary, scenario, timeline, summary_path)


def _run_timeline(drill: Drill, scenario: Scenario, report: Callable[[str], None]) -> Timeline:
    settings = drill.settings
    down = scenario.down
    control = drill.namespaces[down].control()
    timeline = Timeline(started=dt.datetime.now(dt.UTC))

    def fault() -> None:
        control.set_down(settings.mode)
        timeline.fault_at = dt.datetime.now(dt.UTC)

    def restore() -> None:
        control.set_down(None)
        timeline.restored_at = dt.datetime.now(dt.UTC)

    back = settings.warmup + settings.outage
    steps = [
        Step(settings.warmup, f"{down} down ({settings.mode})", fault),
        Step(back, f"{down} back up", restore),
        *scenario.steps(after=back + settings.recovery),
    ]
    steps.sort(key=lambda step: step.offset)  # a scenario may act during the outage too
    sending_for = max(back + settings.recovery, max(step.offset for step in steps))
    begin = time.monotonic()
    scenario.start(rate=settings.messages / sending_for)
    try:
        _follow(drill, scenario, timeline, steps, begin, report)
    finally:
        if timeline.fault_at and not timeline.restored_at:  # never leave a namespace down
            restore()
    return timeline


def _follow(drill: Drill, scenario: Scenario, timeline: Timeline, steps: list[Step], begin: float,
            report: Callable[[str], None]) -> None:
    """Carry out the steps when due, report progress, and return once every message has been handled."""
    settings = drill.settings
    phase, next_report, deadline = "warm-up", 0.0, None
    while True:
        elapsed = time.monotonic() - begin
        while steps and steps[0].offset <= elapsed:
            step = steps.pop(0)
            step.action()
            phase = step.name
            timeline.steps.append({"time": dt.datetime.now(dt.UTC).isoformat(), "step": step.name})
            report(f"[{elapsed:6.1f}s] {step.name}")
        failure = scenario.failure()
        if failure:
            raise RuntimeError(f"the drill stopped at {elapsed:.1f} s: {failure}")
        if deadline is None and not steps and not scenario.sending:
            timeline.sending_done_at = dt.datetime.now(dt.UTC)
            deadline = time.monotonic() + settings.settle_timeout
            phase = "settling"
        if elapsed >= next_report:
            report(f"[{elapsed:6.1f}s] {phase:<28} {_counts(drill)}  {scenario.status()}")
            next_report = elapsed + 5.0
        if deadline is not None and scenario.settled():
            timeline.settled_at = dt.datetime.now(dt.UTC)
            time.sleep(QUIET_SECONDS)
            break
        if deadline is not None and time.monotonic() > deadline:
            report(f"[{elapsed:6.1f}s] not settled after {settings.settle_timeout:.0f} s: {_counts(drill)}")
            break
        time.sleep(0.1)


def _counts(drill: Drill) -> str:
    """Messages sent per namespace, and processed as the summary counts them: distinct MessageIds, however
    many namespaces processed each (a latency drill's two hubs, all-active's two regions)."""
    sent, processed = drill.tracker.counts()
    return (
        f"sent {sum(sent.values())} ({', '.join(f'{n} {c}' for n, c in sorted(sent.items()))})  "
        f"processed {processed}"
    )


def _print(line: str) -> None:
    print(line, flush=True)
