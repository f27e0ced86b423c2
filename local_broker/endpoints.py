"""Where each namespace listens and which key opens it, chosen once and kept beside the data.

A namespace listens on four ports: AMQP (plain, the emulator's), the admin port (HTTPS management), AMQPS
(AMQP over TLS, Service Bus's 5671) and AMQP over WebSockets (TLS; Service Bus uses 443, the broker an
unprivileged 5443). Each comes from, in order: the topology (`local.amqp_port`, `local.admin_port`,
`local.amqps_port`, `local.websocket_port`; 0 = any free port), the command line (`--amqp-port`, ...), what
the data directory remembers from the last start, and the defaults (5672, 5300, 5671, 5443); but when the
topology or the command line fixes the AMQP port and leaves a TLS port (AMQPS, WebSockets) unset, that TLS
port is any free one (kept in the data directory, if there is one, for the next start), never the default:
two brokers whose files each fix their own AMQP ports never meet on 5671 or 5443. Ports taken from
a base (command line or default) go up by one per namespace in file order, the AMQPS ports down by one (5671,
5670, ...: they never meet the AMQP ports above them). Keys: the topology's `policies`, else the remembered
ones, else `RootManageSharedAccessKey` with a key of its own: the emulator's well-known `SAS_KEY_VALUE` for
the first namespace on a loopback address, a generated one for any other (namespaces never share a key, as in
Azure). `broker.json` in the data directory keeps what was chosen, so a restart never breaks a configured
client.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local_broker.auth import ALL_RIGHTS, DEFAULT_POLICY_NAME, SharedAccessPolicy
from local_broker.topology import EMULATOR_KEY, declared_policies
from topology import NamespaceSpec

DEFAULT_PORTS = {"amqp_port": 5672, "admin_port": 5300, "amqps_port": 5671, "websocket_port": 5443}
FOLLOW_AMQP = ("amqps_port", "websocket_port")  # any free port when the AMQP port is fixed (unless set)
STEP = {"amqp_port": 1, "admin_port": 1, "amqps_port": -1, "websocket_port": 1}  # per namespace from a base
STATE_FILE = "broker.json"


@dataclass(frozen=True)
class Endpoint:
    ports: dict[str, int]  # by kind: amqp_port, admin_port, amqps_port, websocket_port
    policies: list[SharedAccessPolicy]
    options: dict[str, str]  # how to change each port, for the "port taken" message


@dataclass(frozen=True)
class PortChoice:
    """Base ports from the command line by kind (missing or None: not given) and the defaults under them
    (missing: any free port)."""

    given: dict[str, int | None] = field(default_factory=dict)
    defaults: dict[str, int] = field(default_factory=dict)


def choose(specs: list[NamespaceSpec], ports: PortChoice, remembered: dict[str, Any], host: str,
           source: str) -> dict[str, Endpoint]:
    chosen = {}
    for index, spec in enumerate(specs):
        kept = remembered.get(spec.name) or {}
        picked: dict[str, tuple[int, str]] = {}
        amqp_fixed = "amqp_port" in spec.local or ports.given.get("amqp_port") is not None
        for kind in DEFAULT_PORTS:  # the AMQP port first: the TLS ports may follow it
            remembered_here, default = kept, ports.defaults.get(kind, 0)
            if kind in FOLLOW_AMQP and amqp_fixed:  # never Service Bus's 5671/5443: see the docstring
                remembered_here = {} if picked["amqp_port"][0] == 0 else kept
                default = 0
            picked[kind] = _port(spec, kind, ports.given.get(kind), remembered_here, default, index, source)
        well_known = index == 0 and _is_loopback(host)
        policies = declared_policies(spec) or _remembered_policies(kept) or [_default_policy(well_known)]
        chosen[spec.name] = Endpoint({kind: port for kind, (port, _) in picked.items()}, policies,
                                     {kind: option for kind, (_, option) in picked.items()})
    return chosen


def _port(spec: NamespaceSpec, key: str, given: int | None, kept: dict[str, Any], default: int, index: int,
          source: str) -> tuple[int, str]:
    option = "--" + key.replace("_", "-")
    if key in spec.local:
        return int(spec.local[key]), f"local.{key} of namespace {spec.name} in {source}"
    if given is not None:
        return (given + STEP[key] * index if given else 0), option
    if key in kept:
        return int(kept[key]), option
    return (default + STEP[key] * index if default else 0), option


def _remembered_policies(kept: dict[str, Any]) -> list[SharedAccessPolicy]:
    return [SharedAccessPolicy(p["name"], p["key"], frozenset(p["rights"])) for p in kept.get("policies", [])]


def _default_policy(well_known: bool) -> SharedAccessPolicy:
    key = EMULATOR_KEY if well_known else base64.b64encode(os.urandom(32)).decode()
    return SharedAccessPolicy(DEFAULT_POLICY_NAME, key, ALL_RIGHTS)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_state(data_dir: str | None) -> dict[str, Any]:
    """What the data directory remembers per namespace (nothing without one)."""
    if data_dir is None:
        return {}
    try:
        return json.loads((Path(data_dir) / STATE_FILE).read_text(encoding="utf-8")).get("namespaces", {})
    except (OSError, ValueError):
        return {}


def write_state(data_dir: str,
                namespaces: dict[str, tuple[dict[str, int], list[SharedAccessPolicy]]]) -> None:
    """Remember each namespace's bound ports and keys (readable by the owner only: it holds keys)."""
    state = {"namespaces": {
        name: {**ports,
               "policies": [{"name": p.name, "key": p.key, "rights": sorted(p.rights)} for p in policies]}
        for name, (ports, policies) in namespaces.items()}}
    path = Path(data_dir) / STATE_FILE
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2)
    os.replace(temporary, path)
