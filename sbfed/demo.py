"""`sbfed demo` (what `make demo` runs): the outage drill of each federation pattern and of Geo-Replication on
the local broker, then `sbfed reconcile` (spark_reconcile) on each drill's audit logs, then one table and the
reports' paths.

Each drill (docs/drills.md) starts `sbfed broker serve` and `sbfed functions run` as processes, applies the
pattern, runs a producer and a consumer, and takes the primary down through the control API. The
reconciliation then reads the audit logs the drill left and writes its JSON summary and HTML report:
mirror mode for all-active, replica and exactly-once modes for active-passive, exactly-once for spillover
and Geo-Replication (whose drill starts no Functions host: the broker replicates).
`--patterns` also takes the recipes (latency, routing, consolidation, editing): replica mode from the
origin for latency, exactly-once for the others. While one drill runs (active-passive, else the first),
`sbfed reconcile --follow` watches its audit logs in a process of its own (sbfed/demo_follow.py); its
final counts are set beside that drill's batch reconciliation.

Exit status: 0 nothing was lost and every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from azure.core.exceptions import AzureError

from patterns.drills.broker import BrokerProcess
from patterns.drills.catalog import SCENARIOS, drill_settings
from patterns.drills.drill import DrillSettings
from patterns.drills.run import DrillResult, run_drill
from patterns.drills.summary import format_summary
from sbfed.demo_follow import FOLLOW_WARMUP_S, FollowRun
from topology.durations import parse_duration

# the default run: the three federation patterns and Geo-Replication beside them; --patterns also takes the
# recipes and geo-replication-async
PATTERNS = ("all-active", "active-passive", "spillover", "geo-replication")
GRACE = "10s"  # a replica later than this after its source is reported late (the outage delays some)


@dataclass(frozen=True)
class Reconciliation:
    pattern: str
    mode: str
    out: Path
    verdict: str
    lost: int | None  # missing messages over all comparisons
    duplicates: int | None
    orphans: int | None  # copies whose source is unknown
    originals: int | None  # replica mode: messages written straight to the target (failover sends)
    report: Path | None
    log: Path
    reasons: tuple[str, ...] = ()  # why it failed or proved nothing (the summary's failures and no_data)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def line(self) -> str:
        """What the demo prints for it: the verdict and its counts, or why there are none."""
        if self.lost is None:
            return f"{self.mode}: DID NOT RUN, see {self.log}"
        return (f"{self.mode}: {self.verdict.upper()}, missing {self.lost}, duplicate copies "
                f"{self.duplicates}, orphans {self.orphans}, originals at the target {self.originals}"
                + "".join(f"\n    {reason}" for reason in self.reasons))


def reconcile_modes(settings: DrillSettings) -> dict[str, list[str]]:
    """The `sbfed reconcile` modes that fit a pattern, each with its mode-specific arguments. Latency
    optimization copies everything from its origin to every hub (replica mode, a comparison per hub); the
    other recipes deliver each message to one place or several chosen ones, or quarantine it, so only
    their consumers' `processed` records can say nothing was lost (exactly-once: a message routed to two
    targets counts as a duplicate there). Geo-Replication's one namespace: exactly-once too."""
    primary, *others = settings.namespaces
    exactly_once = ["--mode", "exactly-once", "--expected-event", "sent"]
    if settings.pattern == "all-active":
        return {"mirror": ["--mode", "mirror"]}
    if settings.pattern == "active-passive":
        secondary = others[0]
        ttl = parse_duration(settings.ttl).total_seconds()
        replica = ["--mode", "replica", "--source", primary, "--replica-ttl", f"{secondary}={ttl:g}s"]
        return {"replica": replica, "exactly-once": exactly_once}
    if settings.pattern == "latency":
        return {"replica": ["--mode", "replica", "--source", primary]}
    return {"exactly-once": exactly_once}


def audit_logs(settings: DrillSettings) -> dict[str, Path]:
    """Each namespace's audit log folder in the drill's output."""
    return {ns: settings.out / "audit" / f"namespace={ns}" for ns in settings.namespaces}


def reconcile_arguments(settings: DrillSettings) -> dict[str, list[str]]:
    """Each fitting mode's `sbfed reconcile` arguments over the drill's audit logs, but --out."""
    logs = [f"--log={ns}={path}" for ns, path in audit_logs(settings).items()]
    return {mode: [*logs, *arguments, "--grace", GRACE]
            for mode, arguments in reconcile_modes(settings).items()}


def reconcile_commands(settings: DrillSettings) -> dict[str, list[str]]:
    """Each fitting mode's `sbfed reconcile` arguments, written to reconcile_out(mode)."""
    return {mode: [*arguments, "--out", str(reconcile_out(settings, mode))]
            for mode, arguments in reconcile_arguments(settings).items()}


def follow_run(settings: DrillSettings) -> tuple[str, FollowRun]:
    """The follow query for a drill: its first mode's arguments, under <drill>/follow-<mode>/."""
    mode, arguments = next(iter(reconcile_arguments(settings).items()))
    return mode, FollowRun(settings.out / f"follow-{mode}", arguments, list(audit_logs(settings).values()))


def follow_pattern(patterns: list[str]) -> str:
    """The drill the follow query watches: the replication drill with an outage, else the first."""
    return "active-passive" if "active-passive" in patterns else patterns[0]


def reconcile_out(settings: DrillSettings, mode: str) -> Path:
    return settings.out / f"reconcile-{mode}"


def reconcile(settings: DrillSettings, log: Path) -> list[Reconciliation]:
    """Run spark_reconcile in this process (one JVM for every run), its output going to `log`."""
    from spark_reconcile import cli as reconcile_cli

    results = []
    for mode, argv in reconcile_commands(settings).items():
        out = reconcile_out(settings, mode)
        with _output_to(log):
            print(f"$ sbfed reconcile {' '.join(argv)}", flush=True)
            try:
                reconcile_cli.main(argv)
            except Exception as error:  # Spark or Java missing: the report says so, the demo goes on
                print(f"sbfed reconcile failed: {type(error).__name__}: {error}", flush=True)
        results.append(_read_reconciliation(settings.pattern, mode, out, log))
    return results


def _read_reconciliation(pattern: str, mode: str, out: Path, log: Path) -> Reconciliation:
    try:
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Reconciliation(pattern, mode, out, "did not run", None, None, None, None, None, log)
    totals = [c["totals"] for c in summary["comparisons"]]

    def total(name: str) -> int:
        return sum(t[name] for t in totals)

    return Reconciliation(pattern, mode, out, summary["verdict"], total("missing"), total("dup_extra"),
                          total("orphan"), total("original"), out / "report.html", log,
                          (*summary["failures"], *summary.get("no_data", ())))


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Point file descriptors 1 and 2 at `path`: Spark's JVM, started inside, inherits them and keeps
    writing its own logs there, away from the demo's table."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _seconds(pair: dict[str, float | None]) -> str:
    return "/".join("-" if v is None else f"{v:.1f}" for v in (pair["producer"], pair["consumer"]))


def table(drills: list[DrillResult], reconciliations: list[Reconciliation]) -> str:
    header = (f"{'pattern':<21} {'sent':>5} {'unsent':>6} {'processed':>9} {'lost':>4} {'twice':>5} "
              f"{'fail over s':>11} {'fail back s':>11} {'lag p50/p99 ms':>16}  {'drill':<5}  reconcile")
    lines = [header, "-" * len(header)]
    for result in drills:
        s = result.summary
        lag = "/".join("-" if v is None else f"{v}" for v in (s["replication_lag_ms"]["p50"],
                                                               s["replication_lag_ms"]["p99"]))
        verdicts = ", ".join(f"{r.mode} {r.verdict.upper()}" for r in reconciliations
                             if r.pattern == s["pattern"])
        lines.append(f"{s['pattern']:<21} {s['sent']:>5} {s['unsent']:>6} {s['processed']:>9} {s['lost']:>4} "
                     f"{s['processed_twice']:>5} {_seconds(s['time_to_fail_over_s']):>11} "
                     f"{_seconds(s['time_to_fail_back_s']):>11} {lag:>16}  "
                     f"{'PASS' if s['passed'] else 'FAIL':<5}  {verdicts or 'not run'}")
    return "\n".join(lines)


def kept_broker(settings: DrillSettings, work_dir: Path, stack: contextlib.ExitStack) -> DrillSettings:
    """The last drill runs on a broker the demo starts itself, so it outlives the drill: a person can look
    at what the drill left in the web console before the demo stops it."""
    (work_dir / "logs").mkdir(parents=True, exist_ok=True)
    served = SCENARIOS[settings.pattern].broker_namespaces(settings.namespaces)
    broker = BrokerProcess(served, work_dir, topology=SCENARIOS[settings.pattern].broker_topology(served))
    stack.callback(broker.stop)
    broker.start()
    return dataclasses.replace(settings, broker_file=broker.ready_path)


def show_console(ready_file: Path, wait: bool) -> None:
    """At a terminal (and unless `wait` is off), print the console's one-time login links and wait for
    Enter; otherwise say that the broker stops: links to a broker that is gone help nobody."""
    if not (wait and sys.stdin.isatty()):
        print("\nthe last drill's broker stops now (at a terminal, without --no-wait, the demo keeps it up "
              "and prints its web console links)")
        return
    namespaces = json.loads(ready_file.read_text(encoding="utf-8"))
    print("\nthe last drill's broker in the web console (one-time login links; docs/console.md):")
    for namespace in namespaces:
        print(f"  {namespace['namespace']}: {namespace['console_url']}")
    print("its metrics for Prometheus (docs/operations.md#metrics-and-traces):")
    for namespace in namespaces:
        print(f"  {namespace['namespace']}: http://127.0.0.1:{namespace['admin_port']}/metrics")
    with contextlib.suppress(EOFError, KeyboardInterrupt):
        input("press Enter to stop the broker and finish ")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sbfed demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("demo-output"), help="output root (default %(default)s)")
    p.add_argument("--messages", type=int, default=400, help="messages per drill (default %(default)s)")
    p.add_argument("--outage", type=float, default=10.0,
                   help="seconds the primary is down (default %(default)s)")
    p.add_argument("--patterns", default=",".join(PATTERNS),
                   help=f"comma-separated drills to run (default %(default)s; any of {', '.join(SCENARIOS)})")
    p.add_argument("--no-reconcile", action="store_true", help="drills only (no Spark, no follow query)")
    p.add_argument("--no-follow", action="store_true",
                   help="no `sbfed reconcile --follow` beside the active-passive (else the first) drill")
    p.add_argument("--no-wait", action="store_true",
                   help="stop the last drill's broker at the end instead of waiting for Enter")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    with contextlib.ExitStack() as stack:  # the last drill's broker, kept up until the end
        return _run(args, stack)


def _run(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    patterns = [p.strip() for p in args.patterns.split(",") if p.strip()]
    unknown = set(patterns) - set(SCENARIOS)
    if unknown:
        print(f"sbfed demo: unknown pattern(s) {', '.join(sorted(unknown))}; "
              f"choose from {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.ERROR, filename=args.out / "clients.log", filemode="w",
                        format="%(asctime)s %(levelname)s %(threadName)s %(name)s %(message)s")
    began = time.monotonic()
    drills: list[DrillResult] = []
    followed = None if args.no_reconcile or args.no_follow else follow_pattern(patterns)
    follow: tuple[str, FollowRun] | None = None
    for pattern in patterns:
        # the followed drill warms up longer: the follow query's first micro-batches, its slowest, end while
        # the drill's traffic still flows, so its verdicts show during the drill
        warmup = {"warmup": FOLLOW_WARMUP_S} if pattern == followed else {}
        print(f"\n== drill: {pattern} ({args.messages} messages, {args.outage:.0f} s outage"
              f"{f', {FOLLOW_WARMUP_S:.0f} s warm-up for the follow query' if warmup else ''})", flush=True)
        settings = drill_settings(pattern, args.out / pattern, messages=args.messages, outage=args.outage,
                                  **warmup)
        if pattern == patterns[-1]:
            settings = kept_broker(settings, args.out / "console-broker", stack)
        if pattern == followed:
            follow = follow_run(settings)
            stack.callback(follow[1].stop)  # stops it if the drill fails; a no-op once stopped
        try:
            watched = follow[1] if follow and pattern == followed else None
            drills.append(run_drill(settings, cleared=watched.start if watched else None,
                                    ready=watched.wait_until_running if watched else None))
        except (AzureError, OSError, RuntimeError, ValueError) as error:
            print(f"sbfed demo: the {pattern} drill could not run: {error}", file=sys.stderr)
            return 1
        if pattern == followed:
            follow[1].drill_ended()
        print(format_summary(drills[-1].summary), flush=True)
    reconciliations: list[Reconciliation] = []
    follow_failed = False
    if not args.no_reconcile:
        log = args.out / "reconcile.log"
        log.unlink(missing_ok=True)
        for result in drills:
            settings = result.scenario.drill.settings
            print(f"\n== sbfed reconcile: {settings.pattern} ({', '.join(reconcile_modes(settings))}); "
                  f"Spark's output: {log}", flush=True)
            for r in reconcile(settings, log):
                print(f"  {r.line()}", flush=True)
                reconciliations.append(r)
                if follow and r.mode == follow[0] and settings.pattern == followed:
                    line, agrees = follow[1].compare(r.lost)
                    print(f"  {line}", flush=True)
                    follow_failed = not agrees
    elapsed = dt.timedelta(seconds=round(time.monotonic() - began))
    print(f"\n== sbfed demo: {elapsed} on {os.cpu_count()} cores\n{table(drills, reconciliations)}")
    print("\nreports:")
    for result in drills:
        print(f"  {result.summary['pattern']}: drill {result.summary_path}")
        for r in reconciliations:
            if r.pattern == result.summary["pattern"]:
                where = f"{r.report} (summary.json beside it)" if r.report else f"did not run, see {r.log}"
                print(f"    reconcile {r.mode}: {where}")
        if follow and result.summary["pattern"] == followed:
            print(f"    reconcile --follow {follow[0]}: {follow[1].out} (status/, verdicts/; "
                  f"`sbfed reconcile report --out` builds its report), output {follow[1].log}")
    show_console(args.out / "console-broker" / "broker-ready.json", wait=not args.no_wait)
    failed = [r.summary["pattern"] for r in drills if not r.summary["passed"]]
    failed += [f"{r.pattern} ({r.mode})" for r in reconciliations if not r.passed]
    failed += [f"{followed} (follow)"] if follow_failed else []
    if failed:
        print(f"\nFAILED: {', '.join(failed)}")
    return 1 if failed else 0
