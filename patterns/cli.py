"""`sbfed topology`: generate a pattern's topology file, and apply any topology file to namespaces."""

from __future__ import annotations

import argparse
import os
import sys

from azure.servicebus.management import ServiceBusAdministrationClient

from patterns import federation, recipes
from patterns.admin_errors import NamespaceFailed
from patterns.apply import apply_topology
from patterns.building import connection_setting
from topology import Topology, TopologyError, dump, load
from topology.problems import did_you_mean

# pattern -> how it reads --namespaces
PATTERNS = {
    "all-active": "two or more peers",
    "active-passive": "primary,secondary",
    "spillover": "two or more, paired in a ring",
    "latency": "origin,hub[,hub...]",
    "routing": "source (targets and their SQL filters from --route NAMESPACE=SQL)",
    "consolidation": "source[,source...],target (optionally --transform)",
    "editing": "source,target (with --transform)",
}


def build_pattern(args: argparse.Namespace) -> Topology:
    names, sink = args.namespaces, args.audit_sink
    topic = args.entity or "events"
    match args.pattern:
        case "all-active":
            return federation.all_active(names, topic, audit_sink=sink)
        case "active-passive":
            return federation.active_passive(*_exactly_two(names), topic, ttl=args.ttl, audit_sink=sink)
        case "spillover":
            return federation.spillover(names, args.entity or "work", deadline=args.deadline, over=args.over,
                                        audit_sink=sink)
        case "latency":
            return recipes.latency_optimization(names[0], names[1:], topic, audit_sink=sink)
        case "routing":
            return recipes.splitting_and_routing(names[0], _routes(args), topic, audit_sink=sink)
        case "consolidation":
            return recipes.consolidation(names[:-1], names[-1], topic, transform=args.transform,
                                         audit_sink=sink)
        case _:
            return recipes.editing(*_exactly_two(names), args.transform or "", topic, audit_sink=sink)


def _exactly_two(namespaces: list[str]) -> tuple[str, str]:
    if len(namespaces) != 2:
        raise ValueError(f"this pattern takes exactly two namespaces, got {len(namespaces)}")
    return namespaces[0], namespaces[1]


def _routes(args: argparse.Namespace) -> dict[str, str]:
    return dict(_pair(r, "--route", "NAMESPACE=SQL") for r in args.route)


def _pair(text: str, option: str, shape: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise ValueError(f"{option} {text!r}: expected {shape}")
    return name.strip(), value.strip()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sbfed topology", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True, metavar="<action>")

    apply = sub.add_parser(
        "apply", help="create or update entities and rules to match a topology file",
        description="Create what is missing and update what differs in each namespace of the topology file, "
                    "through the administration client (HTTPS); print every difference. Nothing is deleted "
                    "unless --delete-extra; applying the same file twice changes nothing.")
    apply.add_argument("--topology", required=True, help="topology file (YAML or JSON)")
    apply.add_argument("--namespace", action="append", default=[], metavar="NAME=CONNECTION_STRING",
                       help="connection string of a namespace (default: the environment variable named "
                            "after its connection setting, e.g. PRIMARY)")
    tls = apply.add_mutually_exclusive_group()
    tls.add_argument("--verify", metavar="CERT", help="CA or server certificate (PEM) to verify HTTPS with "
                                                      "(the local broker writes its own next to its data)")
    tls.add_argument("--insecure", action="store_true", help="do not verify the HTTPS certificate")
    apply.add_argument("--delete-extra", action="store_true",
                       help="delete entities and rules the topology does not declare")
    apply.add_argument("--dry-run", action="store_true", help="print the difference, change nothing")

    generate = sub.add_parser(
        "generate", help="write the topology of a federation pattern",
        description="Write the topology file of a federation pattern or recipe: its namespaces, entities, "
                    "rules and replication tasks, ready for `sbfed broker serve`, `topology apply`, "
                    "`functions run` and `infra params` (docs/patterns.md).")
    generate.add_argument("pattern", choices=sorted(PATTERNS),
                          help="; ".join(f"{name}: {how}" for name, how in PATTERNS.items()))
    generate.add_argument("--namespaces", default="primary,secondary",
                          help="comma-separated namespace names (default %(default)s)")
    generate.add_argument("--entity", help="topic (spillover: queue or topic) name; default events (work)")
    generate.add_argument("--ttl", default="PT2M",
                          help="active-passive: TTL of the replicas, ISO 8601 (default %(default)s)")
    generate.add_argument("--deadline", default="PT5M",
                          help="spillover: processing deadline, ISO 8601 (default %(default)s)")
    generate.add_argument("--over", choices=("queue", "subscription"), default="queue",
                          help="spillover: a queue per namespace, or a topic's consumer subscription "
                               "(default %(default)s)")
    generate.add_argument("--transform", help="consolidation/editing: module:function applied to each copy")
    generate.add_argument("--route", action="append", default=[], metavar="NAMESPACE=SQL",
                          help="routing: a target namespace and the SQL filter that selects its messages")
    generate.add_argument("--audit-sink", help="where audit records go (default ./audit)")
    generate.add_argument("--out", required=True, help="file to write (.json for JSON, else YAML)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        return _generate(args) if args.action == "generate" else _apply(args)
    except TopologyError as err:  # one line per problem, each naming the file
        print(err, file=sys.stderr)
        return 2
    except ValueError as err:
        print(f"sbfed topology {args.action}: {err}", file=sys.stderr)
        return 2
    except NamespaceFailed as err:
        print(f"sbfed topology {args.action}: {err}", file=sys.stderr)
        return 1


def _generate(args: argparse.Namespace) -> int:
    args.namespaces = [n.strip() for n in args.namespaces.split(",") if n.strip()]
    topology = build_pattern(args)
    dump(topology, args.out)
    replicate = sum(1 for t in topology.tasks if t["kind"] == "replicate")
    print(f"wrote {args.out}: {args.pattern} over {', '.join(topology.namespaces)} "
          f"({replicate} replication task(s), {len(topology.tasks) - replicate} audit task(s))")
    return 0


def _apply(args: argparse.Namespace) -> int:
    topology = load(args.topology)
    given = dict(_pair(n, "--namespace", "NAME=CONNECTION_STRING") for n in args.namespace)
    unknown = sorted(set(given) - set(topology.namespaces))
    if unknown:
        raise ValueError("; ".join(f"--namespace {name}: not in {args.topology}, " + did_you_mean(
            name, topology.namespaces, f"it declares {', '.join(topology.namespaces)}") for name in unknown))
    verify: str | bool = False if args.insecure else (args.verify or True)
    clients = {name: _client(name, given.get(name), topology, verify) for name in topology.namespaces}
    result = apply_topology(topology, clients, delete_extra=args.delete_extra, dry_run=args.dry_run)
    if result.conflicts:
        print("nothing was changed: resolve the properties above that cannot change in place",
              file=sys.stderr)
        return 1
    if args.dry_run:
        print("dry run: nothing was changed")
    elif not result.changed:
        print("no changes")
    return 0


def _client(name: str, connection_string: str | None, topology: Topology,
            verify: str | bool) -> ServiceBusAdministrationClient:
    settings = [s for s, ns in topology.connections.items() if ns == name] or [connection_setting(name)]
    from_env = next((os.environ[s] for s in settings if os.environ.get(s)), None)
    connection_string = connection_string or from_env
    if not connection_string:
        raise ValueError(f"namespace '{name}' has no connection string: pass "
                            f"--namespace {name}=<connection string> or set {' or '.join(settings)}")
    if "usedevelopmentemulator=true" in connection_string.replace(" ", "").lower():
        raise ValueError(f"namespace '{name}': that is an AMQP connection string (UseDevelopmentEmulator);"
                            " the admin client needs the HTTPS management endpoint: for the local broker pass"
                            " its admin connection string (`sbfed broker serve --print-json` shows it)")
    return ServiceBusAdministrationClient.from_connection_string(connection_string, connection_verify=verify)
