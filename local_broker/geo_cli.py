"""`sbfed broker geo ...`: the replicas of a geo-replicated namespace on a running broker.

    sbfed broker geo --admin https://127.0.0.1:PORT --key-name NAME --key KEY [--cert PATH] ACTION

    status                                  each replica's region, role (Primary|Secondary), state, lag
    promote REGION [--forced]               make REGION the primary: planned (default) replicates what is
                                            left first and loses nothing; forced switches at once, and
                                            what REGION had not received is lost (the answer lists it)
    region REGION [--down|--up] [--latency-ms N]
                                            take a region down or bring it back (the primary's region is
                                            the namespace's fault switch), or delay what ships to it

Clients keep the namespace's connection string: after a promotion they reconnect, as after an Azure
failover. The control API behind it: docs/control-api.md (`/$control/geo`).
"""

from __future__ import annotations

import argparse
import sys

from local_broker.fault_cli import control_arguments, run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sbfed broker geo", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    control_arguments(parser)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("status", help="each replica's role, state and lag",
                       description="Each replica's region, role, state and replication lag.")
    promote = actions.add_parser("promote", help="make a secondary region the primary",
                                 description="Make a secondary region the primary (planned unless --forced).")
    promote.add_argument("region", help="the secondary region to promote")
    promote.add_argument("--forced", action="store_true",
                         help="switch at once; what the region had not received is lost (default: planned)")
    region = actions.add_parser("region", help="take a region down, bring it back, or delay its replication",
                                description="Take a region down, bring it back, or delay its replication.")
    region.add_argument("region", help="the region")
    state = region.add_mutually_exclusive_group()
    state.add_argument("--down", dest="available", action="store_false", default=None,
                       help="the region is unavailable (default: unchanged)")
    state.add_argument("--up", dest="available", action="store_true", default=None,
                       help="the region is available again (default: unchanged)")
    region.add_argument("--latency-ms", type=int,
                        help="milliseconds an operation takes to reach the region (default: unchanged)")
    return parser


def _request(args: argparse.Namespace) -> tuple[str, str, dict[str, object] | None]:
    if args.action == "status":
        return "GET", "geo", None
    if args.action == "promote":
        return "POST", "geo/promote", {"region": args.region, "mode": "forced" if args.forced else "planned"}
    body = {"available": args.available, "latency_ms": args.latency_ms}
    return "PUT", f"geo/regions/{args.region}", {k: v for k, v in body.items() if v is not None}


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    return run("sbfed broker geo", args, *_request(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
