"""The `sbfed` command: a thin dispatcher that imports each part's CLI only when it is used.

Each subcommand lives in its own part (local_broker, replicators, patterns, spark_reconcile) as a
module with `main(argv: list[str]) -> int`, so `sbfed --help` stays fast and the parts stay walled off.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from sbfed import __version__

# subcommand -> (module with main(argv), one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "reconcile": ("spark_reconcile.cli", "reconcile audit logs with Spark: gaps, duplicates, lag"),
    "functions": ("replicators.cli", "run function_app.py's Service Bus functions locally (functions run)"),
    "infra": ("patterns.infra_cli", "Azure: render the Bicep parameters from a topology (infra params)"),
    "broker": ("local_broker.cli", "the local Service Bus-compatible broker (serve, fault, geo, trust)"),
    "topology": ("patterns.cli", "generate a federation pattern's topology; apply a topology to namespaces"),
    "demo": ("sbfed.demo", "the drill of every pattern, then the reconciliation report (make demo)"),
    "drill": ("patterns.drill_cli", "outage drill of a pattern: loss, duplicates, failover times, lag"),
}


# Commands that read topology files also check their SQL filters and actions with the broker's rules
# language: the grammar lives in local_broker, and the topology package imports nothing of the project.
READS_TOPOLOGY = frozenset({"broker", "topology", "infra", "drill", "demo"})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sbfed",
        description="Cross-region federation and replication for Azure Service Bus.",
        epilog="Run `sbfed <command> --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"sbfed {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name, (_, summary) in sorted(COMMANDS.items()):
        sub.add_parser(name, help=summary, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        if argv[0] in READS_TOPOLOGY:
            from local_broker.topology import check_sql
            from topology import add_check

            add_check(check_sql)
        module = importlib.import_module(COMMANDS[argv[0]][0])
        return int(module.main(argv[1:]) or 0)
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
