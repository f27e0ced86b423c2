"""`sbfed broker ...`: run the local Service Bus-compatible broker.

    sbfed broker serve [--topology FILE] [--data DIR [--sync full|normal] | --in-memory]
                       [--amqp-port 5672] [--admin-port 5300] [--amqps-port 5671] [--websocket-port 5443]
                       [--tls-cert PEM --tls-key PEM] [--host 127.0.0.1]
                       [--print-json] [--ready-file PATH] [--log-level INFO]
                       [--max-connections 5000] [--handshake-timeout 20] [--max-size-mb 409600]
    sbfed broker fault ...            inject faults into a running namespace (local_broker.fault_cli)
    sbfed broker geo ...              a geo-replicated namespace's replicas: status, promote (geo_cli)
    sbfed broker check --data DIR     verify every namespace's store (local_broker.store_cli)
    sbfed broker recover --data DIR --namespace NS --out NEWDIR    salvage a damaged store into a new one

With no arguments it stands in for the official Service Bus emulator: one namespace (`sbemulatorns`), AMQP on
5672, management and `/health` on 5300, `RootManageSharedAccessKey` with the key `SAS_KEY_VALUE`, durable in
the default data directory; and, as Service Bus itself, AMQPS on 5671 and AMQP over WebSockets on 5443
(Service Bus's 443, unprivileged here), both with the broker's certificate (its path is printed). A topology
file (or the emulator's Config.json) gets the same defaults unless it says otherwise. Prints one block per
namespace with its connection strings (`--print-json`: one JSON object per line; `--ready-file`: the same JSON
list written to a file once every port is bound, for scripts and drills). Runs until SIGINT/SIGTERM, then
shuts down cleanly. An invalid topology prints one line per problem and exits 2, and so does a store that is
damaged or cannot be written (one line: the file, what is wrong, what to do); ports already taken are listed
one line each (exit 1). A start that fails leaves nothing new on disk.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import resource
import shlex
import signal
import sys
import threading
from pathlib import Path

from local_broker.endpoints import DEFAULT_PORTS, PortChoice
from local_broker.tls import CERT_FILE
from topology import NamespaceSpec, Topology, TopologyError
from topology.emulator import DEFAULT_NAMESPACE


def default_data_dir() -> Path:
    """`$XDG_DATA_HOME/sbfed/broker`, else `~/.local/share/sbfed/broker`."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "sbfed" / "broker"


def emulator_topology() -> Topology:
    """What the official emulator hosts with an empty Config.json: one namespace, no entities."""
    return Topology(namespaces={DEFAULT_NAMESPACE: NamespaceSpec(DEFAULT_NAMESPACE)}, source="(no topology)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sbfed broker",
                                     description="The local Service Bus-compatible broker.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="<command>")
    sub.add_parser("fault", help="inject faults into a running namespace (see `sbfed broker fault --help`)")
    sub.add_parser("geo", help="a geo-replicated namespace's replicas: status, promote, region outages (see "
                               "`sbfed broker geo --help`)")
    sub.add_parser("trust", help="trust the broker's certificate for every client on this machine, once "
                                 "(--undo to stop; see `sbfed broker trust --help`)")
    sub.add_parser("check", help="verify every namespace's store in a data directory, read-only (see "
                                 "`sbfed broker check --help`)")
    sub.add_parser("recover", help="copy what can be read of a damaged store into a new data directory (see "
                                   "`sbfed broker recover --help`)")
    serve = sub.add_parser(
        "serve", help="host the namespaces of a topology file (or an emulator Config.json)",
        description="With no arguments: the official emulator's equivalent (namespace sbemulatorns, AMQP on "
                    f"{DEFAULT_PORTS['amqp_port']}, management and /health on {DEFAULT_PORTS['admin_port']}, "
                    "RootManageSharedAccessKey=SAS_KEY_VALUE), plus AMQPS on "
                    f"{DEFAULT_PORTS['amqps_port']} and AMQP over WebSockets on "
                    f"{DEFAULT_PORTS['websocket_port']}, durable in the default data directory "
                    f"({default_data_dir()}). Ports and keys, once chosen, are kept in the data directory.")
    serve.add_argument("--topology", help="topology YAML/JSON, or the emulator's Config.json (default: one "
                                          "namespace sbemulatorns with no entities)")
    store = serve.add_mutually_exclusive_group()
    store.add_argument("--data", help="data directory: one SQLite file per namespace, the TLS certificate, "
                                      f"the chosen ports and keys (default: {default_data_dir()})")
    store.add_argument("--in-memory", action="store_true", help="keep everything in memory (throwaway runs)")
    serve.add_argument("--sync", choices=("full", "normal"), default="full",
                       help="durability of --data: full (default) syncs acknowledged sends and changes to "
                            "disk (they survive power loss); normal survives a killed broker process")
    serve.add_argument("--amqp-port", type=int, metavar="PORT",
                       help=f"AMQP port of the first namespace the topology does not pin, the next ones +1 "
                            "(default: the port kept in the data directory, else "
                            f"{DEFAULT_PORTS['amqp_port']}; 0: any free port)")
    serve.add_argument("--admin-port", type=int, metavar="PORT",
                       help="management (HTTPS and plain HTTP) and /health port, likewise (default: kept, "
                            f"else {DEFAULT_PORTS['admin_port']}; 0: any free port)")
    serve.add_argument("--amqps-port", type=int, metavar="PORT",
                       help="AMQP over TLS, likewise but the next namespaces -1 (default: kept, else "
                            f"{DEFAULT_PORTS['amqps_port']}, Service Bus's, or any free port when the AMQP "
                            "port is set by --amqp-port or the topology; 0: any free port)")
    serve.add_argument("--websocket-port", type=int, metavar="PORT",
                       help="AMQP over WebSockets (TLS, path /$servicebus/websocket), likewise "
                            f"(default: kept, else {DEFAULT_PORTS['websocket_port']}, for Service "
                            "Bus's 443, or any free port as --amqps-port; 0: any free port)")
    serve.add_argument("--tls-cert", metavar="PEM",
                       help="certificate (chain) for AMQPS, WebSockets and the admin port, with --tls-key "
                            "(default: a self-signed one made in the data directory)")
    serve.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--print-json", action="store_true", help="print each namespace as a JSON line")
    serve.add_argument("--ready-file", help="write the namespaces as JSON to this file once ready")
    serve.add_argument("--max-connections", type=int, default=5000, metavar="N",
                       help="AMQP connections per namespace; more are refused as Service Bus does "
                            "(default 5000, Service Bus's per-namespace limit)")
    serve.add_argument("--handshake-timeout", type=float, default=20.0, metavar="SECONDS",
                       help="a connection that has not opened AMQP this long after connecting is closed "
                            "(default 20)")
    serve.add_argument("--max-size-mb", type=int, metavar="MB",
                       help="size quota of each namespace, all entities together (default 409600, "
                            "Service Bus Standard's 400 GB); sends beyond it are refused")
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    return parser


def _raise_open_file_limit() -> None:
    """Every AMQP and HTTPS connection is a file descriptor: take all the system allows this process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # an unlimited hard limit the kernel caps lower: keep the soft one
            pass


def main(argv: list[str]) -> int:
    if argv and argv[0] == "fault":
        from local_broker import fault_cli

        return fault_cli.main(argv[1:])
    if argv and argv[0] == "geo":
        from local_broker import geo_cli

        return geo_cli.main(argv[1:])
    if argv and argv[0] == "trust":
        from local_broker import trust

        return trust.main(argv[1:])
    if argv and argv[0] in ("check", "recover"):
        from local_broker import store_cli

        return store_cli.main(argv[0], argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    from local_broker.engine.errors import StoreError
    from local_broker.server import BrokerServer

    data_dir = None if args.in_memory else (args.data or str(default_data_dir()))
    ports = PortChoice({kind: getattr(args, kind) for kind in DEFAULT_PORTS}, DEFAULT_PORTS)
    own_cert = Path(data_dir, CERT_FILE) if data_dir and not args.tls_cert else None
    cert_before = own_cert.read_bytes() if own_cert and own_cert.is_file() else None
    try:
        server = BrokerServer(args.topology or emulator_topology(), data_dir=data_dir,
                              in_memory=args.in_memory, host=args.host, synchronous=args.sync.upper(),
                              ports=ports, max_connections=args.max_connections,
                              handshake_timeout=args.handshake_timeout, max_size_mb=args.max_size_mb,
                              tls=(args.tls_cert, args.tls_key) if args.tls_cert else None)
    except TopologyError as exc:
        print(exc, file=sys.stderr)
        return 2
    _raise_open_file_limit()
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server.start()
    except (TopologyError, StoreError) as exc:
        print(exc, file=sys.stderr)
        return 2
    except OSError as exc:  # every port already taken, one line each
        for line in str(exc).splitlines():
            print(f"sbfed broker serve: {line}", file=sys.stderr)
        return 1
    # The broker's own objects live for the whole process: keep them out of the collector's scans, and
    # collect young objects less often (the per-message garbage is short-lived). About 1.5x throughput.
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    server.thread.collect_garbage_when_quiet()  # what outlived the young generations, when idle
    described = [hosted.describe() for hosted in server.namespaces.values()]
    for entry in described:
        if args.print_json:
            print(json.dumps(entry), flush=True)
        else:
            print(f"namespace {entry['namespace']}: amqp port {entry['amqp_port']}, "
                  f"admin port {entry['admin_port']}, amqps port {entry['amqps_port']}, "
                  f"websocket port {entry['websocket_port']}\n  {entry['emulator_connection_string']}\n"
                  f"  admin: {entry['emulator_admin_connection_string']}\n"
                  f"  AMQPS / WebSockets (no emulator mode): {entry['amqps_connection_string']}\n"
                  f"  certificate (HTTPS, AMQPS, WebSockets; trust it as a CA): {entry['cert_path']}\n"
                  f"  console (one-time login link): {entry['console_url']}", flush=True)
            if "geo_replication" in entry:
                geo = entry["geo_replication"]
                print(f"  geo-replicated ({geo['mode']}): primary {geo['primary']}, regions "
                      f"{', '.join(geo['regions'])} (`sbfed broker geo`)", flush=True)
    if not args.print_json:
        print(f"data: {data_dir or 'in memory'}", flush=True)
        if own_cert and own_cert.read_bytes() != cert_before:
            print(f"new certificate {own_cert}: trust it once for every client on this machine with `"
                  + shlex.join(["sbfed", "broker", "trust", *(["--data", data_dir] if args.data else [])])
                  + "` (undo: add --undo)", flush=True)
    if args.ready_file:
        temporary = args.ready_file + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(described, handle)
        os.replace(temporary, args.ready_file)
    stop.wait()
    server.stop()
    return 0
