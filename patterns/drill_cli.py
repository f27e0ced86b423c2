"""`sbfed drill <pattern>`: an outage drill of a federation pattern or recipe on the local broker
(docs/drills.md).

Starts `sbfed broker serve` with the pattern's namespaces (or uses a running broker's, `--broker
READY_FILE`), applies the pattern through the admin client, runs its replication tasks with `sbfed functions
run`, runs its producers and consumers, takes a namespace down through the control API for `--outage`
seconds (the three patterns: the primary, whose clients fail over; a recipe: a namespace it copies to, whose
copies must catch up), brings it back, and prints what was sent, processed, lost, processed twice, the times
to fail over and back, and the replication lag. Everything lands under `--out` (default
./demo-output/<pattern>).

Exit status: 0 the drill passed, 1 something was lost or a check of the pattern failed, 2 bad arguments
or the drill could not run.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from azure.core.exceptions import AzureError

from patterns.drills.catalog import SCENARIOS, drill_settings
from patterns.drills.drill import DrillSettings
from patterns.drills.run import run_drill
from patterns.drills.summary import format_summary

DEFAULTS = drill_settings("active-passive", Path("."))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sbfed drill",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("pattern", choices=sorted(SCENARIOS),
                   help="the pattern or recipe to drill: " + ", ".join(sorted(SCENARIOS)))
    p.add_argument(
        "--messages", type=int, default=DEFAULTS.messages, help="messages to send (default %(default)s)"
    )
    p.add_argument(
        "--outage",
        type=float,
        default=DEFAULTS.outage,
        help="seconds the primary (a recipe: the namespace it copies to) stays down (default %(default)s)",
    )
    p.add_argument("--out", type=Path, help="output directory (default ./demo-output/<pattern>)")
    p.add_argument(
        "--mode",
        choices=("drop", "refuse"),
        default=DEFAULTS.mode,
        help="drop: open connections are cut and new ones refused (a regional outage, default); "
        "refuse: only new connections are refused",
    )
    p.add_argument(
        "--warmup",
        type=float,
        default=DEFAULTS.warmup,
        help="seconds of normal traffic before the fault (default %(default)s)",
    )
    p.add_argument(
        "--ttl", default=DEFAULTS.ttl, help="active-passive: replica TimeToLive (default %(default)s)"
    )
    p.add_argument(
        "--deadline",
        default=DEFAULTS.deadline,
        help="spillover: processing deadline, ISO 8601 (default %(default)s)",
    )
    p.add_argument(
        "--lock-duration",
        default=DEFAULTS.lock_duration,
        help="lock duration of the pattern's queues and subscriptions (default %(default)s)",
    )
    p.add_argument(
        "--probe-interval",
        type=float,
        default=DEFAULTS.probe_interval,
        help="seconds between the failover clients' probes of the primary (default %(default)s)",
    )
    p.add_argument(
        "--settle-timeout",
        type=float,
        default=DEFAULTS.settle_timeout,
        help="seconds to wait after the last send for every message to be handled (default %(default)s)",
    )
    broker = p.add_mutually_exclusive_group()
    broker.add_argument(
        "--broker",
        type=Path,
        metavar="READY_FILE",
        help="use the namespaces of a running `sbfed broker serve --ready-file READY_FILE`",
    )
    broker.add_argument(
        "--data",
        action="store_true",
        help="run the broker durable (SQLite under <out>/broker-data) instead of in memory",
    )
    p.add_argument(
        "--namespaces",
        help="namespace names, comma-separated: "
        + "; ".join(f"{name}: {s.namespace_roles} (default {','.join(s.default_namespaces)})"
                    for name, s in SCENARIOS.items()),
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log the clients' failovers and retries")
    return p


def settings_from(args: argparse.Namespace) -> DrillSettings:
    names = tuple(n.strip() for n in (args.namespaces or "").split(",") if n.strip())
    return drill_settings(
        args.pattern,
        args.out or Path("demo-output") / args.pattern,
        messages=args.messages,
        outage=args.outage,
        warmup=args.warmup,
        mode=args.mode,
        ttl=args.ttl,
        deadline=args.deadline,
        lock_duration=args.lock_duration,
        probe_interval=args.probe_interval,
        settle_timeout=args.settle_timeout,
        broker_file=args.broker,
        namespaces=names,
        in_memory=not args.data,
    )


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from(args)
    except ValueError as error:
        parser.error(str(error))
    (settings.out / "logs").mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR,
        filename=None if args.verbose else settings.out / "logs" / "clients.log",
        filemode="w",
        format="%(asctime)s %(levelname)s %(threadName)s %(name)s %(message)s",
    )
    try:
        result = run_drill(settings)
    except (AzureError, OSError, RuntimeError, ValueError) as error:
        print(f"sbfed drill: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    print(format_summary(result.summary))
    return 0 if result.summary["passed"] else 1
