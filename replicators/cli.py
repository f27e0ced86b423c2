"""`sbfed functions run`: run function_app.py's Service Bus and Kafka functions locally, against any
namespace and Kafka cluster."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

from replicators.connections import ConnectionSettingError
from replicators.host.host import FunctionsHost
from replicators.host.hostjson import load_host_json
from replicators.host.kafka_runner import KafkaSettingError
from replicators.host.loader import FunctionAppError
from replicators.host.settings import apply_settings, load_local_settings
from replicators.tasks import TaskConfigError
from replicators.telemetry import configure

TOPOLOGY_SETTING = "SBFED_TOPOLOGY"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sbfed functions", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    summary = "run the app's Service Bus-triggered functions with SDK receivers, its Kafka-triggered ones " \
              "with a Kafka consumer"
    run = sub.add_parser(
        "run", help=summary,
        description=f"{summary[0].upper()}{summary[1:]}, against any namespace: the connection settings "
                    "come from local.settings.json or the environment, host.json sets prefetch, concurrency, "
                    "batch size and lock renewal; prints throughput and lag until Ctrl+C.")
    run.add_argument(
        "--app", default="function_app.py", help="the Functions app script (default: %(default)s)"
    )
    run.add_argument("--settings", help="local.settings.json (default: next to the app)")
    run.add_argument("--host-json", help="host.json (default: next to the app)")
    run.add_argument("--topology", help=f"topology file for the app (sets {TOPOLOGY_SETTING})")
    run.add_argument("--only", action="append", metavar="FUNCTION", help="run only these functions")
    run.add_argument("--stats-interval", type=float, default=5.0,
                     help="seconds between reports (default %(default)s)")
    run.add_argument("--metrics-port", type=int, metavar="PORT",
                     help="serve the replicators' metrics for Prometheus at http://127.0.0.1:PORT/metrics "
                          "(default: none; 0 is refused)")
    run.add_argument("-v", "--verbose", action="store_true", help="log every retry and settlement problem")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    app = Path(args.app)
    apply_settings(load_local_settings(args.settings or app.with_name("local.settings.json")))
    if args.topology:
        os.environ[TOPOLOGY_SETTING] = str(Path(args.topology).resolve())
    if args.metrics_port is not None and not 0 < args.metrics_port < 65536:
        print(f"sbfed functions: --metrics-port must be a port from 1 to 65535, not {args.metrics_port}",
              file=sys.stderr)
        return 2
    try:
        for exporter in configure(os.environ, metrics_port=args.metrics_port):
            print(f"sbfed functions: metrics and traces to {exporter}", flush=True)
    except OSError as exc:
        print(f"sbfed functions: cannot serve metrics on port {args.metrics_port}: {exc.strerror} "
              "(choose another --metrics-port)", file=sys.stderr)
        return 2
    try:
        host = FunctionsHost(
            app,
            load_host_json(args.host_json or app.with_name("host.json")),
            os.environ,
            only=set(args.only) if args.only else None,
        )
    except (FunctionAppError, TaskConfigError, ConnectionSettingError, KafkaSettingError, ValueError) as exc:
        print(f"sbfed functions: {exc}", file=sys.stderr)
        return 2
    if not host.runners:
        print(f"sbfed functions: {app} has no Service Bus- or Kafka-triggered functions", file=sys.stderr)
        return 2

    def stop(signum: int, _frame: object) -> None:
        print(
            f"stopping ({signal.Signals(signum).name}): finishing in-flight batches",
            file=sys.stderr,
            flush=True,
        )
        host.stop_event.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print(f"sbfed functions: running {', '.join(r.trigger.function_name for r in host.runners)}", flush=True)
    host.run(lambda line: print(line, flush=True), args.stats_interval)
    return 0
