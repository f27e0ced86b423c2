"""`sbfed broker ...`: run the local Service Bus-compatible broker.

    sbfed broker serve --topology FILE [--data DIR [--sync full|normal] | --in-memory] [--host 127.0.0.1]
                       [--print-json] [--ready-file PATH] [--log-level INFO]
    sbfed broker fault ...            inject faults into a running namespace (local_broker.fault_cli)

Prints one line per namespace with its AMQP connection string, admin connection string and certificate
(`--print-json`: one JSON object per line; `--ready-file`: the same JSON list written to a file once every
port is bound, for scripts and drills). Runs until SIGINT/SIGTERM, then shuts down cleanly.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import sys
import threading

from local_broker.topology import TopologyError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sbfed broker",
                                     description="The local Service Bus-compatible broker.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="<command>")
    sub.add_parser("fault", help="inject faults into a running namespace (see `sbfed broker fault --help`)")
    serve = sub.add_parser("serve",
                           help="host the namespaces of a topology file (or an emulator Config.json)")
    serve.add_argument("--topology", required=True, help="topology YAML/JSON, or the emulator's Config.json")
    store = serve.add_mutually_exclusive_group()
    store.add_argument("--data", help="data directory: one SQLite file per namespace and the TLS certificate")
    store.add_argument("--in-memory", action="store_true", help="keep everything in memory (throwaway runs)")
    serve.add_argument("--sync", choices=("full", "normal"), default="full",
                       help="durability of --data: full (default) syncs acknowledged sends and changes to "
                            "disk (they survive power loss); normal survives a killed broker process")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--print-json", action="store_true", help="print each namespace as a JSON line")
    serve.add_argument("--ready-file", help="write the namespaces as JSON to this file once ready")
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    return parser


def main(argv: list[str]) -> int:
    if argv and argv[0] == "fault":
        from local_broker import fault_cli

        return fault_cli.main(argv[1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    from local_broker.server import BrokerServer

    if not args.data and not args.in_memory:
        print("sbfed broker serve: give --data DIR for a durable broker, or --in-memory", file=sys.stderr)
        return 2
    try:
        server = BrokerServer(args.topology, data_dir=args.data, in_memory=args.in_memory, host=args.host,
                              synchronous=args.sync.upper())
    except (OSError, TopologyError) as exc:
        print(f"sbfed broker serve: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server.start()
    except OSError as exc:
        print(f"sbfed broker serve: cannot listen: {exc}", file=sys.stderr)
        server.stop()
        return 1
    # The broker's own objects live for the whole process: keep them out of the collector's scans, and
    # collect young objects less often (the per-message garbage is short-lived). About 1.5x throughput.
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    described = [hosted.describe() for hosted in server.namespaces.values()]
    for entry in described:
        if args.print_json:
            print(json.dumps(entry), flush=True)
        else:
            print(f"namespace {entry['namespace']}: amqp port {entry['amqp_port']}, "
                  f"admin port {entry['admin_port']}\n  {entry['connection_string']}\n"
                  f"  admin: {entry['admin_connection_string']}\n  certificate: {entry['cert_path']}",
                  flush=True)
    if args.ready_file:
        temporary = args.ready_file + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(described, handle)
        os.replace(temporary, args.ready_file)
    stop.wait()
    server.stop()
    return 0
