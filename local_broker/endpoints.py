"""Where each namespace listens and which key opens it, chosen once and kept beside the data.

A namespace's AMQP and admin ports come from, in order: the topology (`local.amqp_port`, `local.admin_port`;
0 = any free port), the command line (`--amqp-port`, `--admin-port`), what the data directory remembers from
the last start, and the defaults (the emulator's 5672 and 5300). Ports taken from a base (command line or
default) go up by one per namespace in file order. Keys: the topology's `policies`, else the remembered
ones, else `RootManageSharedAccessKey` with a key of its own: the emulator's well-known `SAS_KEY_VALUE` for
the first namespace on a loopback address, a generated one for any other (namespaces never share a key,
as in Azure). `broker.json` in the data directory keeps what was chosen, so a
restart never breaks a configured client.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_broker.auth import ALL_RIGHTS, DEFAULT_POLICY_NAME, SharedAccessPolicy
from local_broker.topology import EMULATOR_KEY, declared_policies
from topology import NamespaceSpec

DEFAULT_AMQP_PORT = 5672
DEFAULT_ADMIN_PORT = 5300
STATE_FILE = "broker.json"


@dataclass(frozen=True)
class Endpoint:
    amqp_port: int
    admin_port: int
    policies: list[SharedAccessPolicy]
    amqp_option: str  # how to change the port, for the "port taken" message
    admin_option: str


@dataclass(frozen=True)
class PortChoice:
    """Base ports from the command line (None: not given) and the defaults under them."""

    amqp: int | None = None
    admin: int | None = None
    default_amqp: int = 0
    default_admin: int = 0


def choose(specs: list[NamespaceSpec], ports: PortChoice, remembered: dict[str, Any], host: str,
           source: str) -> dict[str, Endpoint]:
    chosen = {}
    for index, spec in enumerate(specs):
        kept = remembered.get(spec.name) or {}
        amqp, amqp_option = _port(spec, "amqp_port", ports.amqp, kept, ports.default_amqp, index, source)
        admin, admin_option = _port(spec, "admin_port", ports.admin, kept, ports.default_admin, index, source)
        well_known = index == 0 and _is_loopback(host)
        policies = declared_policies(spec) or _remembered_policies(kept) or [_default_policy(well_known)]
        chosen[spec.name] = Endpoint(amqp, admin, policies, amqp_option, admin_option)
    return chosen


def _port(spec: NamespaceSpec, key: str, given: int | None, kept: dict[str, Any], default: int, index: int,
          source: str) -> tuple[int, str]:
    option = "--" + key.replace("_", "-")
    if key in spec.local:
        return int(spec.local[key]), f"local.{key} of namespace {spec.name} in {source}"
    if given is not None:
        return (given + index if given else 0), option
    if key in kept:
        return int(kept[key]), option
    return (default + index if default else 0), option


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


def write_state(data_dir: str, namespaces: dict[str, tuple[int, int, list[SharedAccessPolicy]]]) -> None:
    """Remember each namespace's bound ports and keys (readable by the owner only: it holds keys)."""
    state = {"namespaces": {
        name: {"amqp_port": amqp, "admin_port": admin,
               "policies": [{"name": p.name, "key": p.key, "rights": sorted(p.rights)} for p in policies]}
        for name, (amqp, admin, policies) in namespaces.items()}}
    path = Path(data_dir) / STATE_FILE
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2)
    os.replace(temporary, path)
