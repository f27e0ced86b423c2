"""`sbfed infra params`: render infra/main.parameters.json from the topology file.

Every option can come from the environment instead (the SBFED_* variables below), so the azd
`preprovision` hook in azure.yaml can run it with values kept in the azd environment
(`azd env set SBFED_LOCATION_MAP primary=westeurope,secondary=northeurope`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from patterns.infra_params import HOSTINGS, SKUS, InfraOptions, render_parameters, write_parameters
from topology import TopologyError, load


def parse_location_map(text: str) -> dict[str, str]:
    """'primary=westeurope,secondary=northeurope' -> {'primary': 'westeurope', 'secondary': 'northeurope'}."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, region = item.partition("=")
        if not sep or not name.strip() or not region.strip():
            raise TopologyError(f"location map entry {item!r}: expected <namespace>=<region>")
        out[name.strip()] = region.strip()
    return out


def app_relative_path(topology: Path, app_root: Path) -> str:
    """The topology file's path inside the deployed app; it must be deployed with the app to be read there."""
    try:
        return topology.resolve().relative_to(app_root.resolve()).as_posix()
    except ValueError:
        raise TopologyError(f"{topology} is outside the app root {app_root}: the Function App reads the "
                            "topology file it is deployed with; keep the file inside the project") from None


def _parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="sbfed infra",
                                     description="Azure deployment helpers (infra/*.bicep).")
    sub = parser.add_subparsers(dest="action", required=True, metavar="<action>")
    params = sub.add_parser(
        "params", help="render the Bicep parameters file from a topology file",
        description="Render the ARM parameters of infra/main.bicep (namespaces, entities, rules, role "
                    "assignments, connection settings) from the topology file.")
    params.add_argument("--topology", default=env("SBFED_TOPOLOGY_FILE"),
                        help="topology file (default: $SBFED_TOPOLOGY_FILE)")
    params.add_argument("--out", default="infra/main.parameters.json",
                        help="parameters file to write (default: %(default)s)")
    params.add_argument("--location-map", default=env("SBFED_LOCATION_MAP", ""),
                        help="Azure region per namespace: primary=westeurope,secondary=northeurope "
                             "(default: $SBFED_LOCATION_MAP)")
    params.add_argument("--hosting", choices=HOSTINGS, default=env("SBFED_HOSTING", "flex"),
                        help="Function App plan: Flex Consumption or Elastic Premium "
                             "(default: $SBFED_HOSTING, else flex)")
    params.add_argument("--sku", choices=SKUS, default=env("SBFED_SKU", "Standard"),
                        help="Service Bus tier of every namespace (default: $SBFED_SKU, else Standard)")
    params.add_argument("--name-prefix", default="${AZURE_ENV_NAME}",
                        help="resource group and name seed; default: the azd environment name")
    params.add_argument("--app-location", default="${AZURE_LOCATION}",
                        help="region of the Function App, storage and monitoring; default: the azd location")
    params.add_argument("--operator-principal-id", default="${AZURE_PRINCIPAL_ID}",
                        help="Entra object id given read access to the audit logs; '' for none; "
                             "default: the signed-in azd user")
    params.add_argument("--app-root", default=".",
                        help="the folder deployed as the Function App (default: %(default)s)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        if not args.topology:
            raise TopologyError("no topology file: pass --topology FILE or set SBFED_TOPOLOGY_FILE")
        topology_path = Path(args.topology)
        options = InfraOptions(
            locations=parse_location_map(args.location_map),
            topology_file=app_relative_path(topology_path, Path(args.app_root)),
            hosting=args.hosting,
            sku=args.sku,
            name_prefix=args.name_prefix,
            app_location=args.app_location,
            operator_principal_id=args.operator_principal_id,
        )
        try:
            topology = load(topology_path)
        except TopologyError as err:  # one line per problem, each naming the file
            print(err, file=sys.stderr)
            return 2
        document = render_parameters(topology, options)
        write_parameters(document, args.out)
    except (OSError, TopologyError) as err:
        print(f"sbfed infra params: error: {err}", file=sys.stderr)
        return 2
    values = document["parameters"]
    namespaces = values["namespaces"]["value"]
    entities = sum(len(ns["queues"]) + len(ns["topics"]) for ns in namespaces)
    rules = sum(len(s["rules"]) for ns in namespaces for t in ns["topics"] for s in t["subscriptions"])
    roles = sum(len(ns["roleAssignments"]) for ns in namespaces)
    print(f"wrote {args.out}: {len(namespaces)} namespaces, {entities} queues/topics, {rules} rules, "
          f"{roles} Service Bus role assignments, {len(values['connections']['value'])} connection settings")
    if any(ns.policies for ns in topology.namespaces.values()):
        print("note: SAS policies in the topology are for the local broker only; Azure namespaces are "
              "deployed with local (key) auth disabled", file=sys.stderr)
    return 0
