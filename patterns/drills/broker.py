"""The broker side of a drill: `sbfed broker serve` as a separate process (or namespaces given by a ready
file), and its control API over HTTPS to take a namespace down and bring it back.

Drills never import `local_broker`: they start it as a user would and talk to it through connection strings,
the admin client and the documented control routes (docs/control-api.md)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus, urlencode

import yaml
from azure.servicebus import parse_connection_string
from azure.servicebus.management import ServiceBusAdministrationClient

from patterns.drills.processes import SbfedProcess

READY_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0
TOKEN_LIFETIME_SECONDS = 3600


class BrokerError(RuntimeError):
    """The broker did not start, or its control API refused a call; the message says what it answered."""


@dataclass(frozen=True)
class BrokerNamespace:
    """One namespace as `sbfed broker serve --ready-file` describes it."""

    name: str
    connection_string: str
    admin_connection_string: str
    cert_path: str

    @classmethod
    def of(cls, entry: dict[str, Any]) -> BrokerNamespace:
        try:
            return cls(
                entry["namespace"],
                entry["connection_string"],
                entry["admin_connection_string"],
                entry["cert_path"],
            )
        except KeyError as missing:
            raise BrokerError(f"the broker's description of a namespace lacks {missing}: {entry}") from None

    @property
    def admin_url(self) -> str:
        """`https://host:port` of the management port (the admin connection string's endpoint)."""
        endpoint = parse_connection_string(self.admin_connection_string).fully_qualified_namespace
        return f"https://{endpoint.split('://')[-1].rstrip('/')}"

    def admin_client(self) -> ServiceBusAdministrationClient:
        return ServiceBusAdministrationClient.from_connection_string(
            self.admin_connection_string, connection_verify=self.cert_path
        )

    def control(self) -> ControlClient:
        parsed = parse_connection_string(self.admin_connection_string)
        return ControlClient(
            self.admin_url,
            parsed.shared_access_key_name or "",
            parsed.shared_access_key or "",
            self.cert_path,
        )


class ControlClient:
    """The broker's `/$control` routes for one namespace, authorized with a Manage policy's SAS token and
    over TLS verified against the broker's own certificate."""

    def __init__(self, admin_url: str, key_name: str, key: str, cert_path: str) -> None:
        self.admin_url, self.key_name, self.key = admin_url, key_name, key
        self._tls = ssl.create_default_context(cafile=cert_path)

    def set_down(self, mode: str | None) -> dict[str, Any]:
        """`mode` "drop" (a regional outage: open connections cut, new ones refused), "refuse" (new
        connections refused only), or None (back up). Returns the fault state the broker answers."""
        return self.call("PUT", "faults", {"namespace_down": mode})

    def faults(self) -> dict[str, Any]:
        return self.call("GET", "faults")

    def call(self, method: str, route: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.admin_url}/$control/{route}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": self._token(), "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30, context=self._tls) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            raise BrokerError(
                f"{method} {request.full_url}: {error.code} {error.read().decode(errors='replace')}"
            ) from None
        except OSError as error:
            raise BrokerError(f"{method} {request.full_url}: {error}") from None

    def _token(self) -> str:
        """A Service Bus SAS token for the management endpoint (audience `https://host:port`)."""
        expiry = str(int(time.time()) + TOKEN_LIFETIME_SECONDS)
        signed = hmac.new(
            self.key.encode(), f"{quote_plus(self.admin_url)}\n{expiry}".encode(), hashlib.sha256
        )
        signature = base64.b64encode(signed.digest()).decode()
        fields = {"sr": self.admin_url, "sig": signature, "se": expiry, "skn": self.key_name}
        return "SharedAccessSignature " + urlencode(fields)


def namespaces_only(names: Iterable[str]) -> dict[str, Any]:
    """The broker's topology: the namespaces and nothing else, so the pattern's entities are created the way
    they are in Azure, by `topology apply` through the admin client; ephemeral ports (a drill never takes the
    emulator's)."""
    return {"namespaces": {name: {"local": {"amqp_port": 0, "admin_port": 0}} for name in names}}


def read_ready_file(path: str | Path) -> dict[str, BrokerNamespace]:
    """Namespaces from `sbfed broker serve --ready-file` (a JSON list) or its `--print-json` lines."""
    text = Path(path).read_text(encoding="utf-8").strip()
    try:
        entries = (
            json.loads(text) if text.startswith("[") else [json.loads(line) for line in text.splitlines()]
        )
    except ValueError as error:
        raise BrokerError(f"{path}: not the JSON `sbfed broker serve` writes: {error}") from None
    return {entry.name: entry for entry in map(BrokerNamespace.of, entries)}


class BrokerProcess:
    """`sbfed broker serve` in its own process, on ephemeral loopback ports; its output goes to
    `<work_dir>/logs/broker.log`, its namespaces to `<work_dir>/broker-ready.json`."""

    def __init__(self, names: Iterable[str], work_dir: Path, *, in_memory: bool = True,
                 topology: dict[str, Any] | None = None) -> None:
        """`topology`: what the broker starts with (default: `namespaces_only(names)`)."""
        self.topology_path = work_dir / "broker-topology.yaml"
        self.ready_path = work_dir / "broker-ready.json"
        self._topology = topology or namespaces_only(names)
        store = ["--in-memory"] if in_memory else ["--data", str(work_dir / "broker-data")]
        self._process = SbfedProcess(
            "`sbfed broker serve`",
            ["broker", "serve", "--topology", str(self.topology_path), *store,
             "--ready-file", str(self.ready_path), "--log-level", "INFO"],
            work_dir / "logs" / "broker.log")

    def start(self) -> dict[str, BrokerNamespace]:
        self.topology_path.write_text(yaml.safe_dump(self._topology), encoding="utf-8")
        self.ready_path.unlink(missing_ok=True)
        self._process.start(self.ready_path.exists, READY_TIMEOUT_SECONDS)
        return read_ready_file(self.ready_path)

    def stop(self) -> None:
        self._process.stop(STOP_TIMEOUT_SECONDS)
