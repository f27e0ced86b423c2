"""The local broker process: N namespaces, each with its own AMQP port and HTTPS admin port.

All namespaces share one reactor thread (which owns every engine); each has a SASL listener for AMQP
and an `AdminServer` (HTTPS management, control API, `/health`) whose threads hand work to the reactor.

Programmatic use (tests, drills):

    server = BrokerServer("topology.yaml")     # or a dict / `topology.Topology`; data_dir=... for durable
    server.start()
    ns = server.namespaces["primary"]
    ServiceBusClient.from_connection_string(ns.connection_string)
    ServiceBusAdministrationClient.from_connection_string(ns.admin_connection_string,
                                                          connection_verify=server.cert_path)
    server.call("primary", lambda namespace: namespace.get_queue_runtime_properties("q1"))
    server.stop()

Ports and keys: `local_broker.endpoints` (`ports=PortChoice(...)`; by default any free port). With a
`data_dir` the chosen ports and keys are kept in `<data_dir>/broker.json` and reused on the next start.

`data_dir` holds one SQLite file per namespace (`<name>.db`) and the admin TLS certificate; without it
(or with `in_memory=True`) the engines keep everything in memory and the certificate goes to a
temporary directory (removed by `stop()`).

`synchronous="FULL"` (default): every acknowledged send, scheduled message and management change
survives power loss (the write-ahead log is synced before the acknowledgement); a
settlement survives a killed broker, and power loss can only make a settled message come back
(at-least-once). `"NORMAL"`: everything survives a killed broker process but not an OS crash.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from local_broker.auth import MANAGE, NamespaceAuth, SharedAccessPolicy
from local_broker.endpoints import DEFAULT_PORTS, Endpoint, PortChoice, choose, read_state, write_state
from local_broker.engine import NamespaceConfig, SystemClock
from local_broker.engine.namespace import Namespace
from local_broker.faults import FaultState, NamespaceFaults
from local_broker.geo.hosting import GeoHost
from local_broker.geo.store import GeoStore
from local_broker.store import MemoryStore, SqliteStore
from local_broker.store.problems import opening, writing
from local_broker.tls import Certificate, ensure_certificate, supplied_certificate
from local_broker.topology import apply_entities, check_sql
from local_broker.wire.admin.metrics import ConnectionCounts
from local_broker.wire.admin.server import AdminServer
from local_broker.wire.amqp.endpoint import MAX_CONNECTIONS, NamespaceEndpoint
from local_broker.wire.amqp.logs import log_event
from local_broker.wire.amqp.reactor import EngineThread
from local_broker.wire.amqp.sasl import HANDSHAKE_TIMEOUT_S, SaslListener
from local_broker.wire.amqp.streams import Layers
from local_broker.wire.rest.api import MessagingApi
from local_broker.wire.rest.heads import HeadRequests
from topology import NamespaceSpec, Topology, add_check, load, parse

log = logging.getLogger("local_broker.server")
HEALTH_TIMEOUT_S = 5.0
LISTENER_NAMES = {"amqp_port": "AMQP", "amqps_port": "AMQPS", "websocket_port": "AMQP over WebSockets"}
PORT_NAMES = {kind: f"{name} port" for kind, name in {**LISTENER_NAMES, "admin_port": "admin"}.items()}
T = TypeVar("T")


@dataclass
class HostedNamespace:
    """One namespace as clients see it."""

    name: str
    host: str
    amqp_port: int
    admin_port: int
    amqps_port: int
    websocket_port: int
    policy: SharedAccessPolicy
    cert_path: str
    engine: Any
    faults: NamespaceFaults
    endpoint: NamespaceEndpoint
    console_url: str = ""  # the console's one-time login link (empty once used)
    geo: GeoHost | None = None  # a geo-replicated namespace's replicas and promotion

    def _connection_string(self, host: str, port: str, suffix: str) -> str:
        return (f"Endpoint=sb://{host}{port};SharedAccessKeyName={self.policy.name};"
                f"SharedAccessKey={self.policy.key}{suffix}")

    @property
    def connection_string(self) -> str:
        return self._connection_string(self.host, f":{self.amqp_port}", ";UseDevelopmentEmulator=true")

    @property
    def amqps_connection_string(self) -> str:
        """Azure's form (no emulator flag): AMQP over TLS, for clients with no emulator mode. The port is left
        out when it is Service Bus's 5671 (clients that ignore it, such as the Python SDK, are then right)."""
        port = "" if self.amqps_port == DEFAULT_PORTS["amqps_port"] else f":{self.amqps_port}"
        return self._connection_string(_client_host(self.host), f"{port}/", "")

    @property
    def admin_connection_string(self) -> str:
        return self._connection_string(self.host, f":{self.admin_port}", "")

    @property
    def emulator_connection_string(self) -> str:
        """The official emulator's form (`Endpoint=sb://localhost;...;UseDevelopmentEmulator=true;`), the
        port left out when it is the emulator's 5672."""
        port = "" if self.amqp_port == DEFAULT_PORTS["amqp_port"] else f":{self.amqp_port}"
        return self._connection_string(_client_host(self.host), port, ";UseDevelopmentEmulator=true;")

    @property
    def emulator_admin_connection_string(self) -> str:
        return self._connection_string(_client_host(self.host), f":{self.admin_port}",
                                       ";UseDevelopmentEmulator=true;")

    @property
    def ports(self) -> dict[str, int]:
        return {"amqp_port": self.amqp_port, "admin_port": self.admin_port, "amqps_port": self.amqps_port,
                "websocket_port": self.websocket_port}

    def describe(self) -> dict[str, Any]:
        return {"namespace": self.name, "amqp_port": self.amqp_port, "admin_port": self.admin_port,
                "amqps_port": self.amqps_port, "websocket_port": self.websocket_port,
                "connection_string": self.connection_string,
                "amqps_connection_string": self.amqps_connection_string,
                "admin_connection_string": self.admin_connection_string,
                "emulator_connection_string": self.emulator_connection_string,
                "emulator_admin_connection_string": self.emulator_admin_connection_string,
                "cert_path": self.cert_path, "console_url": self.console_url,
                **({"geo_replication": self.geo.summary()} if self.geo is not None else {})}


def _client_host(host: str) -> str:
    """The name clients use: `localhost` for a loopback or wildcard bind (the certificate names it)."""
    return "localhost" if host in ("127.0.0.1", "::1", "0.0.0.0", "::", "localhost") else host


def _browser_host(host: str) -> str:
    """The address a browser on this machine opens (a literal one: `localhost` may try ::1 first)."""
    if host in ("0.0.0.0", "localhost"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


class PortInUseError(OSError):
    """A port the broker must listen on is taken; the message names it and how to choose another."""


class GeoWalSync:
    """WalSync for a geo-replicated namespace: the primary's log, and in synchronous mode every secondary's
    (they hold what was acknowledged too); a replica seeded or opened again gets a new one."""

    def __init__(self, store: GeoStore) -> None:
        self.store = store
        self._syncs: dict[tuple[str, int], WalSync] = {}

    def __call__(self) -> None:
        store = self.store
        replicas = [store.replicas[store.primary], *(store.secondaries() if store.synchronous else ())]
        for replica in replicas:
            key = (replica.region, id(replica.store))
            if key not in self._syncs:
                self._syncs[key] = WalSync(replica.path)
            self._syncs[key]()

    def close(self) -> None:
        for sync in self._syncs.values():
            sync.close()


class WalSync:
    """Flushes a SQLite database's write-ahead log to disk: then every committed transaction is durable."""

    def __init__(self, database: Path) -> None:
        self.wal = Path(f"{database}-wal")
        self.database = database
        self._fd: int | None = None

    def __call__(self) -> None:
        if self._fd is None:
            if not self.wal.exists():  # nothing written in WAL mode yet: the database file is all there is
                fd = os.open(self.database, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
                return
            self._fd = os.open(self.wal, os.O_RDONLY)
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _connection_policy(policies: list[SharedAccessPolicy]) -> SharedAccessPolicy:
    return next((p for p in policies if MANAGE in p.rights), policies[0])


def _first_missing(path: Path) -> Path | None:
    """The outermost directory of `path` that does not exist yet (what making `path` would create)."""
    missing = None
    for folder in (path, *path.parents):
        if folder.exists():
            return missing
        missing = folder
    return missing


def _port_free(host: str, port: int) -> bool:
    """Whether a listener could bind `port` now (with SO_REUSEADDR, as the broker's listeners do)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def taken_ports(endpoints: dict[str, Endpoint], host: str) -> list[str]:
    """One line per fixed port that is already taken (or chosen twice), naming how to change it."""
    lines = []
    chosen: dict[int, str] = {}
    for name, endpoint in endpoints.items():
        for kind, port in endpoint.ports.items():
            if not port:
                continue
            what = f"the {PORT_NAMES[kind]} of namespace {name}"
            option = endpoint.options[kind]
            if port in chosen:
                lines.append(f"port {port} ({what}) is also {chosen[port]}; choose another with {option}")
            elif not _port_free(host, port):
                lines.append(f"port {port} ({what}) is already in use; choose another with {option}")
            chosen.setdefault(port, what)
    return lines


@contextmanager
def _naming_taken_port(port: int, what: str, option: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise PortInUseError(f"port {port} ({what}) is already in use; choose another with {option}") \
            from None


class BrokerServer:
    """Hosts the namespaces of a topology; see the module docstring."""

    def __init__(self, topology: str | os.PathLike[str] | dict | Topology,
                 data_dir: str | None = None, in_memory: bool | None = None, host: str = "127.0.0.1",
                 synchronous: str = "FULL", ports: PortChoice | None = None,
                 max_connections: int = MAX_CONNECTIONS, handshake_timeout: float = HANDSHAKE_TIMEOUT_S,
                 max_size_mb: int | None = None, tls: tuple[str, str] | None = None) -> None:
        """`tls`: a certificate (chain) file and its key file for AMQPS, WebSockets and the admin port; None:
        the broker's own self-signed certificate, made on first start beside the data."""
        add_check(check_sql)
        if isinstance(topology, str | os.PathLike):
            topology = load(topology)
        elif isinstance(topology, dict):
            topology = parse(topology)
        self.topology = topology
        self.specs = list(topology.namespaces.values())
        self.ports = ports or PortChoice()
        self.data_dir = data_dir
        self.in_memory = data_dir is None or bool(in_memory)  # default: durable when data_dir is given
        self.host = host
        self.synchronous = synchronous
        self.max_connections = max_connections  # AMQP connections per namespace
        self.handshake_timeout = handshake_timeout  # seconds from accept to the client's AMQP open
        self.max_size_mb = max_size_mb  # all messages of a namespace together (None: Service Bus Standard's)
        self.tls = tls
        self.namespaces: dict[str, HostedNamespace] = {}
        self.thread = EngineThread()
        self._admins: list[AdminServer] = []
        self._temp_dir: str | None = None
        self._geo: dict[str, GeoHost] = {}
        self.cert_path = ""

    # --- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Bind every port and open every store. Every port already taken is reported at once, before
        anything is written to disk; if starting fails later, a data directory it made is removed again."""
        durable = None if self.in_memory else self.data_dir
        endpoints = choose(self.specs, self.ports, read_state(durable), self.host, self.topology.source)
        taken = taken_ports(endpoints, self.host)
        if taken:
            raise PortInUseError("\n".join(taken))
        made = None if self.data_dir is None else _first_missing(Path(self.data_dir))
        try:
            self._start(endpoints, durable)
        except BaseException:
            self.stop()
            if made is not None:
                shutil.rmtree(made, ignore_errors=True)
            raise

    def _start(self, endpoints: dict[str, Endpoint], durable: str | None) -> None:
        cert_dir = self.data_dir or tempfile.mkdtemp(prefix="sbfed-broker-")
        if self.data_dir is None:
            self._temp_dir = cert_dir
        with writing(Path(cert_dir)):
            certificate = supplied_certificate(*self.tls) if self.tls else ensure_certificate(cert_dir)
        self.cert_path = str(certificate.cert_path)
        context = certificate.server_context()
        layers = {"amqp_port": None, "amqps_port": Layers(context), "websocket_port": Layers(context, True)}
        for spec in self.specs:
            self._host(spec, endpoints[spec.name], certificate, layers)
        self.thread.start()
        browser_host = _browser_host(self.host)
        for (name, hosted), admin in zip(self.namespaces.items(), self._admins, strict=True):
            chosen = endpoints[name]
            with _naming_taken_port(chosen.ports["admin_port"], f"the admin port of namespace {name}",
                                    chosen.options["admin_port"]):
                admin.start()
            hosted.admin_port = admin.port
            admin.console.amqp_address = (_client_host(self.host), hosted.amqp_port)
            admin.console.admin_address = (_client_host(self.host), admin.port)
            admin.console.certificate = self.cert_path
            hosted.console_url = admin.console.login_url(f"http://{browser_host}:{admin.port}") or ""
            log_event(log, logging.INFO, "namespace-ready", **hosted.describe())
        consoles = {name: (f"http://{browser_host}:{h.admin_port}", h.faults)
                    for name, h in self.namespaces.items()}
        for admin in self._admins:
            admin.console.namespaces = consoles
        if durable is not None:
            write_state(durable, {name: (hosted.ports, endpoints[name].policies)
                                  for name, hosted in self.namespaces.items()})

    def _host(self, spec: NamespaceSpec, chosen: Endpoint, certificate: Certificate,
              layers: dict[str, Layers | None]) -> None:
        engine, sync = self._open_engine(spec)
        apply_entities(engine, spec, self.topology.source)
        engine.commit()
        if sync is not None:
            sync()
            self.thread.on_closing(sync.close)
        auth = NamespaceAuth(chosen.policies)
        faults = NamespaceFaults()
        endpoint = NamespaceEndpoint(spec.name, engine, auth, self.thread, faults, sync, self.max_connections)
        listeners = {}
        for kind, layer in layers.items():
            what = f"the {LISTENER_NAMES[kind]} port of namespace {spec.name}"
            with _naming_taken_port(chosen.ports[kind], what, chosen.options[kind]):
                listeners[kind] = SaslListener(
                    self.thread.loop, self.host, chosen.ports[kind], auth, endpoint,
                    endpoint.accept_connection, faults, self.handshake_timeout, layer)
            self.thread.on_closing(listeners[kind].close)
        self.thread.on_closing(endpoint.close)
        geo = self._geo.get(spec.name)
        if geo is not None:
            geo.attach(self.thread.call, engine, endpoint, faults)
            self.thread.on_closing(geo.close)  # shipping stops before the stores close
        self.thread.on_closing(engine.close)
        faults.on_change(lambda old, new, e=endpoint: self._on_fault_change(e, old, new))

        def run_on_engine(fn: Callable[[Any], T], engine: Any = engine) -> T:
            return self.thread.call(lambda: fn(engine), participant=endpoint)

        admin = AdminServer(spec.name, self.host, chosen.ports["admin_port"], str(certificate.cert_path),
                            str(certificate.key_path), auth, run_on_engine, faults,
                            health=lambda: self._problems(engine, endpoint, listeners),
                            connections=lambda: ConnectionCounts(endpoint.open_connections,
                                                                 endpoint.connections_opened,
                                                                 endpoint.connections_closed),
                            requests=endpoint.requests,
                            messaging=MessagingApi(spec.name, auth, faults,
                                                   lambda fn: self.thread.call(fn, participant=endpoint),
                                                   HeadRequests(engine, self.thread, endpoint)),
                            geo=geo)
        self._admins.append(admin)
        self.namespaces[spec.name] = HostedNamespace(
            name=spec.name, host=self.host, amqp_port=listeners["amqp_port"].port,
            admin_port=chosen.ports["admin_port"], amqps_port=listeners["amqps_port"].port,
            websocket_port=listeners["websocket_port"].port,
            policy=_connection_policy(chosen.policies), cert_path=str(certificate.cert_path), engine=engine,
            faults=faults, endpoint=endpoint, geo=geo)

    def _open_engine(self, spec: NamespaceSpec) -> tuple[Any, WalSync | None]:
        """The engine of a namespace, and how to flush its commits to disk (None: nothing to flush)."""
        config = NamespaceConfig(name=spec.name,
                                 max_message_size_in_kilobytes=spec.local.get("max_message_size_kb", 256))
        if self.max_size_mb is not None:
            config.max_size_in_megabytes = self.max_size_mb
        if spec.geo_replication is not None:
            return self._open_geo(spec, config)
        if self.in_memory:
            return Namespace.open(MemoryStore(), config=config, clock=SystemClock()), None
        path = Path(self.data_dir) / f"{spec.name}.db"
        with opening(path, spec.name):
            Path(self.data_dir).mkdir(parents=True, exist_ok=True)
            # SQLite commits without syncing; the endpoint syncs the write-ahead log itself when a turn holds
            # acknowledged data (what synchronous=FULL would do after every commit, settlements included).
            store = SqliteStore(str(path), synchronous="NORMAL")
            engine = Namespace.open(store, config=config, clock=SystemClock())
        return engine, (WalSync(path) if self.synchronous == "FULL" else None)

    def _open_geo(self, spec: NamespaceSpec, config: NamespaceConfig) -> tuple[Any, GeoWalSync | None]:
        """A geo-replicated namespace: one SQLite store per region (in the temporary directory when the
        broker keeps nothing), the engine on the current primary's."""
        root = Path(str(self.data_dir or self._temp_dir))
        with opening(root / "regions", spec.name):
            geo = self._geo[spec.name] = GeoHost(spec.name, spec.geo_replication, root)
            engine = Namespace.open(geo.store, config=config, clock=SystemClock())
        return engine, (GeoWalSync(geo.store) if self.synchronous == "FULL" else None)

    def _problems(self, engine: Any, endpoint: NamespaceEndpoint,
                  listeners: dict[str, SaslListener]) -> list[str]:
        """What keeps a namespace from serving fully (empty: healthy), asked of the reactor itself."""
        if not self.thread.alive:
            return ["the AMQP reactor thread has stopped: no AMQP client is served"]

        def check() -> list[str]:
            problems = []
            for kind, listener in listeners.items():
                if not listener.listening:
                    problems.append(f"the {LISTENER_NAMES[kind]} listener is closed")
            if not engine.has_storage_room():
                problems.append("storage full: the disk under the namespace's store is nearly full; sends "
                                "are refused, receives and settlements work")
            if endpoint.failure is not None:
                problems.append(f"the last commit failed: {endpoint.failure.description}")
            return problems

        try:
            return self.thread.call(check, timeout=HEALTH_TIMEOUT_S)
        except TimeoutError:
            return [f"the AMQP reactor did not answer within {HEALTH_TIMEOUT_S:.0f} s"]

    def _on_fault_change(self, endpoint: NamespaceEndpoint, old: FaultState, new: FaultState) -> None:
        if new.drops_connections and not old.drops_connections:
            self.thread.call(endpoint.drop_connections)

    def stop(self) -> None:
        for admin in self._admins:
            admin.stop()
        self.thread.stop()
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def __enter__(self) -> BrokerServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- for tests and drills ----------------------------------------------------------------------------
    def call(self, namespace: str, fn: Callable[[Any], T]) -> T:
        """Run `fn(engine namespace)` on the reactor thread and return its result."""
        engine = self.namespaces[namespace].engine
        return self.thread.call(lambda: fn(engine))
