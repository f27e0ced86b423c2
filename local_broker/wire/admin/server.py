"""The HTTPS management endpoint of one namespace: Service Bus ATOM API, control API and `/health`, and
Service Bus's REST messaging (`messaging`, local_broker/wire/rest: `.../messages...` routes).

Construction (by `local_broker.server`, one per namespace):

    server = AdminServer(namespace_name, host, port, cert_path, key_path, auth, run_on_engine, faults)
    server.start()          # binds (port 0 = ephemeral) and serves on a background thread
    server.port             # the bound port
    server.stop()           # stops accepting and closes open connections

* `auth`: `local_broker.auth.NamespaceAuth`; every route but `/health` needs a SAS token with Manage (the
  messaging routes: Send or Listen).
* `run_on_engine(fn)`: runs `fn(namespace)` on the thread that owns the engine and returns its result
  (re-raising its exception). Each request makes one such call.
* `console`: the web console (`local_broker.console`) at `/` and `/$console/...`; it signs users in with a
  policy name and key and keeps a session cookie.
* `faults`: `local_broker.faults.NamespaceFaults`; while the namespace is down the management routes
  answer 503 (the control routes keep working so a drill can bring it back), and `latency_ms` delays them.
* `health()`: the reasons the namespace does not serve fully (reactor, listener, store); `/health` answers
  503 with them, 200 when there are none.

TLS and plain HTTP share the port: a connection whose first byte is 0x16 (a TLS ClientHello) is wrapped
in TLS, anything else is served as plain HTTP (so `curl http://127.0.0.1:PORT/health` works). The SDK
always uses https:// and verifies the certificate given as `connection_verify`.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from local_broker.auth import LISTEN, MANAGE, NamespaceAuth
from local_broker.console import Console
from local_broker.console import operations as console_operations
from local_broker.control import CONTROL_PREFIX, ControlApi, control_error
from local_broker.engine import BrokerError, UnauthorizedError
from local_broker.faults import NamespaceFaults
from local_broker.tls import Certificate
from local_broker.wire.admin import atom, metrics
from local_broker.wire.admin.operations import (
    AdminRequest,
    AdminResponse,
    Operations,
    RunOnEngine,
    parse_put_body,
    parse_target,
)
from local_broker.wire.amqp.tally import Requests
from local_broker.wire.rest.api import MessagingApi, route
from local_broker.wire.rest.heads import Parked

log = logging.getLogger("local_broker.admin")

SUPPLEMENTARY_HEADERS = {
    "forward_to": "ServiceBusSupplementaryAuthorization",
    "forward_dead_lettered_messages_to": "ServiceBusDlqSupplementaryAuthorization",
}
TLS_RECORD_HANDSHAKE = 0x16
AMQP_HEADER_START = b"AMQP"
HANDSHAKE_TIMEOUT = 10.0
IDLE_TIMEOUT = 120.0
SHUTDOWN_POLL_SECONDS = 0.05
DRAIN_LIMIT = 64 << 20  # bytes of a refused request body read (and dropped) before answering
DRAIN_IDLE_SECONDS = 1.0
JSON = "application/json"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024  # the listen backlog: long-poll clients connect by the hundred at once

    def __init__(self, address: tuple[str, int], admin: AdminServer) -> None:
        self.admin = admin
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        self.parked_requests: set[Any] = set()  # sockets whose request waits for a parked answer
        super().__init__(address, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Sniff TLS vs plain HTTP on the connection's first byte, then serve it."""
        connection: socket.socket = request
        try:
            # An answer right after a small write waits for its ACK without NODELAY (Nagle): ~40 ms.
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection.settimeout(HANDSHAKE_TIMEOUT)
            first = connection.recv(1, socket.MSG_PEEK)
            if first and first[0] == TLS_RECORD_HANDSHAKE:
                connection = self.admin.tls_context.wrap_socket(connection, server_side=True)
        except (OSError, ssl.SSLError) as exc:  # a client that rejects our certificate, or went away
            log.debug("connection from %s failed before its first request: %s", client_address, exc)
            return
        self._serve_connection(request, connection, client_address, None)

    def _serve_connection(self, request: Any, connection: socket.socket, client_address: Any,
                          resumed: _Resumed | None) -> bool:
        """Serve requests on `connection` until it closes (False), or until one is parked, a long poll
        (True): the connection is then left open as it is and this thread ends; `resume` serves it on
        once the answer is ready, on a thread of its own. A parked connection holds no thread."""
        with self.connections_lock:
            self.connections.add(connection)
        handler = None
        try:
            connection.settimeout(IDLE_TIMEOUT)
            handler = self.RequestHandlerClass(connection, client_address, self, resumed)
        finally:
            parked = handler is not None and handler.parked is not None
            if parked:
                if resumed is None:  # the request thread's `shutdown_request` comes next: it must not close
                    self.parked_requests.add(request)
                meta = handler.parked_request  # type: ignore[union-attr]
                handler.parked.when_settled(  # type: ignore[union-attr]
                    lambda answer: self.resume(request, connection, client_address, _Resumed(answer, *meta)))
            else:
                with self.connections_lock:
                    self.connections.discard(connection)
                if connection is not request:
                    connection.close()
        return parked

    def resume(self, request: Any, connection: socket.socket, client_address: Any, resumed: _Resumed) -> None:
        """A parked request's answer is ready (called on the reactor): a thread writes it and serves on."""
        threading.Thread(target=self._resumed, args=(request, connection, client_address, resumed),
                         daemon=True, name="admin-resumed").start()

    def _resumed(self, request: Any, connection: socket.socket, client_address: Any,
                 resumed: _Resumed) -> None:
        parked = False
        try:
            parked = self._serve_connection(request, connection, client_address, resumed)
        except Exception:
            self.handle_error(request, client_address)
        if not parked:
            super().shutdown_request(request)

    def shutdown_request(self, request: Any) -> None:
        """The request thread of a parked request leaves its socket open (the answer comes later)."""
        if request in self.parked_requests:
            self.parked_requests.discard(request)
            return
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("error serving %s", client_address, exc_info=True)

    def close_connections(self) -> None:
        with self.connections_lock:
            open_connections = list(self.connections)
        for connection in open_connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _BadBody(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _too_large() -> _BadBody:
    return _BadBody(413, f"The request body is larger than the {atom.MAX_BODY_BYTES} bytes allowed.")


@dataclass(frozen=True)
class _Resumed:
    """A parked request's answer, with what its handler knew of the request to write it."""

    answer: AdminResponse
    command: str
    requestline: str
    request_version: str
    close_connection: bool


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def __init__(self, request: Any, client_address: Any, server: _Server, resumed: _Resumed | None) -> None:
        self.resumed = resumed
        self.parked: Parked | None = None  # set when a request is parked: the connection is handed over
        self.parked_request: tuple[str, str, str, bool] = ("", "", "", True)
        super().__init__(request, client_address, server)

    def handle(self) -> None:
        """Serve requests until the connection closes or one is parked; a resumed connection first gets
        the answer of the request that was parked on it."""
        resumed = self.resumed
        if resumed is not None:
            self.command, self.requestline = resumed.command, resumed.requestline
            self.request_version, self.close_connection = resumed.request_version, resumed.close_connection
            answer = resumed.answer
            self._send(answer.status, answer.body, answer.content_type, answer.headers)
            if self.close_connection:
                return
        super().handle()

    def do_GET(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def handle_one_request(self) -> None:
        """An AMQP client dialing this port (its protocol header, no line end) waits for the broker's header:
        it is answered at once instead of waiting here for a request line until the idle timeout."""
        try:
            start = self.rfile.peek(len(AMQP_HEADER_START))[:len(AMQP_HEADER_START)]
        except OSError:
            self.close_connection = True
            return
        if start == AMQP_HEADER_START:
            self.close_connection = True
            self.requestline, self.command, self.request_version = "AMQP", "", "HTTP/1.1"
            body = "This is the management port (HTTPS and the console); AMQP has ports of its own."
            self._send(400, atom.render_error(400, body), atom.ERROR_CONTENT_TYPE)
            return
        super().handle_one_request()

    def _serve(self) -> None:
        try:
            body = self._read_body()
        except _BadBody as exc:
            self.close_connection = True
            self._send(exc.status, atom.render_error(exc.status, str(exc)), atom.ERROR_CONTENT_TYPE)
            return
        connection = self.connection
        answer = self.server.admin.respond(self.command, self.path, dict(self.headers.items()), body,
                                           "https" if isinstance(connection, ssl.SSLSocket) else "http",
                                           peer=self.client_address[0],
                                           connection_open=lambda: _still_open(connection))
        if isinstance(answer, Parked):
            self.parked = answer
            self.parked_request = (self.command, self.requestline, self.request_version,
                                   self.close_connection)
            self.close_connection = True  # this handler stops here; the connection stays open (see _Server)
            return
        self._send(answer.status, answer.body, answer.content_type, answer.headers)

    def _read_body(self) -> bytes:
        size = self._declared_size()
        if size > atom.MAX_BODY_BYTES:
            self._drain(size)
            raise _too_large()
        return self.rfile.read(size) if size else b""

    def _declared_size(self) -> int:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raise _BadBody(411, "Chunked request bodies are not supported; send a Content-Length.")
        declared = self.headers.get("Content-Length") or "0"
        if not declared.isdigit():
            raise _BadBody(400, f"Content-Length '{declared}' is not a number.")
        return int(declared)

    def _drain(self, size: int) -> None:
        """Read and drop a refused body: a client still sending it would not read the answer (its TLS layer
        reports the closed connection instead). Past DRAIN_LIMIT, or once the client pauses for
        DRAIN_IDLE_SECONDS (it waits for the answer), the answer goes and the connection closes."""
        remaining = size if size <= DRAIN_LIMIT else 0
        self.connection.settimeout(DRAIN_IDLE_SECONDS)
        try:
            while remaining:
                chunk = self.rfile.read1(min(remaining, 1 << 16))
                if not chunk:
                    return
                remaining -= len(chunk)
        except OSError:  # a pause (timeout) or a reset: answer now
            return
        finally:
            self.connection.settimeout(IDLE_TIMEOUT)

    def handle_expect_100(self) -> bool:
        """`Expect: 100-continue`: a body that would be refused is refused before the client sends it."""
        try:
            if self._declared_size() > atom.MAX_BODY_BYTES:
                raise _too_large()
        except _BadBody as exc:
            self.close_connection = True
            self._send(exc.status, atom.render_error(exc.status, str(exc)), atom.ERROR_CONTENT_TYPE)
            return False
        return super().handle_expect_100()

    def _send(self, status: int, payload: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self._headers_buffer.append(b"\r\n" + payload)  # end_headers, with the body in the same write
        self.flush_headers()


class AdminServer:
    """The management and control endpoint of one namespace (see the module docstring)."""

    def __init__(self, namespace_name: str, host: str, port: int, cert_path: str, key_path: str,
                 auth: NamespaceAuth, run_on_engine: RunOnEngine, faults: NamespaceFaults,
                 clock: Callable[[], float] = time.time, health: Callable[[], list[str]] = list,
                 connections: Callable[[], metrics.ConnectionCounts] = (
                     lambda: metrics.ConnectionCounts(0, 0, 0)),
                 requests: Requests | None = None, messaging: MessagingApi | None = None,
                 geo: Any = None) -> None:
        """`connections`, `requests`: the namespace's AMQP connections and requests (its endpoint's), for
        /metrics. `messaging`: the REST messaging routes (wire/rest), None to serve management only.
        `geo`: a geo-replicated namespace's `GeoHost` (its /$control/geo routes)."""
        self.namespace_name = namespace_name
        self.auth = auth
        self.faults = faults
        self.clock = clock
        self.health = health  # what keeps the namespace from serving fully (empty: nothing)
        self.connections = connections
        self.requests = requests or Requests()
        self.messaging = messaging
        self.run_on_engine = run_on_engine
        self.tls_context = Certificate(Path(cert_path), Path(key_path)).server_context()
        self.operations = Operations(namespace_name, run_on_engine)
        self.control = ControlApi(namespace_name, faults, run_on_engine, geo)
        self.console = Console(namespace_name, auth, run_on_engine, faults, self.control, health, clock)
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("The management endpoint is not started.")
        return self._server.server_address[1]

    def start(self) -> None:
        self._server = _Server(self._address, self)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,),
                                        daemon=True, name=f"admin-{self.namespace_name}")
        self._thread.start()

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    # --- one request ------------------------------------------------------------------------------

    def respond(self, method: str, raw_path: str, headers: dict[str, str], body: bytes,
                scheme: str, peer: str = "", connection_open: Callable[[], bool] = lambda: True
                ) -> AdminResponse | Parked:
        """The answer to one request (`peer`: the client's address); never raises. A long poll of the
        messaging routes may answer later (`Parked`), until then asking `connection_open()`."""
        parts = urlsplit(raw_path)
        segments = [unquote(s) for s in parts.path.split("/") if s]
        lowered = {k.lower(): v for k, v in headers.items()}
        is_control = bool(segments) and segments[0].lower() == CONTROL_PREFIX
        messaging = (None if self.messaging is None or is_control or Console.serves(segments)
                     else route(method, segments))
        if messaging is not None:
            host = lowered.get("host") or f"{self._address[0]}:{self._address[1]}"
            return self.messaging.respond(messaging, dict(parse_qsl(parts.query)), headers, body,  # type: ignore[union-attr]
                                          f"{scheme}://{host}", connection_open)
        if [s.lower() for s in segments] == ["health"] and method == "GET":
            return self._health()
        try:
            if Console.serves(segments):  # the web console authenticates by its own session cookie
                page = self.console.respond(method, segments, parts.query, lowered, body, scheme == "https")
                return AdminResponse(page.status, page.body, page.content_type, page.headers)
            if [s.lower() for s in segments] == ["metrics"] and method == "GET":
                return self._metrics(lowered.get("authorization"), peer)
            claim = self.auth.verify_header(lowered.get("authorization"), self.clock())
            if is_control:
                claim.require("", MANAGE)
                answer = self.control.handle(method, segments[1:], body)
                return AdminResponse(answer.status, answer.encode(), JSON)
            query = dict(parse_qsl(parts.query))
            return self._management(method, segments, query, lowered, body, scheme, claim)
        except BrokerError as exc:
            if is_control:
                refusal = control_error(exc.http_status, exc.description)
                return AdminResponse(refusal.status, refusal.encode(), JSON)
            return _error(exc.http_status, exc.description)
        except Exception:
            log.exception("management request %s %s failed", method, raw_path)
            return _error(500, "The broker failed to process the request.")

    def _health(self) -> AdminResponse:
        """200 when the namespace serves fully; 503 with the reasons when not (fault injection aside)."""
        problems = self.health()
        body = {"status": "degraded" if problems else "ok", "namespace": self.namespace_name,
                "namespace_down": self.faults.state.namespace_down}
        if problems:
            body["reasons"] = problems
        return AdminResponse(503 if problems else 200, json.dumps(body).encode(), JSON)

    def _metrics(self, token: str | None, peer: str) -> AdminResponse:
        """Prometheus' scrape: free from loopback (where the broker listens by default), else with a SAS
        token of a Listen or Manage policy (a scrape config's `authorization: {type: SharedAccessSignature,
        credentials: sr=...}`). Nothing in it is a secret; it names no key."""
        if token or not _loopback(peer):
            claim = self.auth.verify_header(token, self.clock())
            if not (claim.authorizes("", LISTEN) or claim.authorizes("", MANAGE)):
                claim.require("", LISTEN)
        _, rows = self.run_on_engine(console_operations.entities)
        page = metrics.render(self.namespace_name, rows, self.connections(),
                              available=self.faults.state.namespace_down is None, requests=self.requests,
                              rest=self.messaging.requests.snapshot() if self.messaging else None,
                              geo=self.control.geo.status() if self.control.geo is not None else None)
        return AdminResponse(200, page, metrics.CONTENT_TYPE)

    def _management(self, method: str, segments: list[str], query: dict[str, str], headers: dict[str, str],
                    body: bytes, scheme: str, claim: Any) -> AdminResponse:
        state = self.faults.state
        if state.namespace_down is not None:
            raise _Unavailable(state.unavailable(self.namespace_name))
        if state.latency_ms:
            time.sleep(state.latency_seconds)
        resource = "/".join(segments)
        target = parse_target(resource)
        claim.require(resource, MANAGE)  # the requested resource, as a token's audience names it
        host = headers.get("host") or f"{self._address[0]}:{self._address[1]}"
        request = AdminRequest(method, target, query, body, is_update="if-match" in headers,
                               base_url=f"{scheme}://{host}")
        put_body = None
        if method == "PUT":
            put_body = parse_put_body(request)
            self._verify_forwarding(put_body[1], headers)
        return self.operations.handle(request, put_body)

    def _verify_forwarding(self, values: Any, headers: dict[str, str]) -> None:
        """Forwarding needs Manage on the destination too, shown by the supplementary token."""
        if not isinstance(values, dict):
            return
        for attribute, header in SUPPLEMENTARY_HEADERS.items():
            destination = values.get(attribute)
            if destination and not headers.get(header.lower()):
                raise UnauthorizedError(f"MissingToken: setting {attribute} needs the {header} header "
                                        f"with a token for '{destination}'.")
            if destination:
                self.auth.verify_header(headers[header.lower()], self.clock()).require(destination, MANAGE)


def _still_open(connection: socket.socket) -> bool:
    """Whether the client of a parked request still waits (asked on the reactor: never blocks). It has left
    when it closed the connection, or, over TLS, sent anything (its close_notify; an HTTP/1.1 client sends
    nothing else before its answer)."""
    poll = select.poll()
    try:
        poll.register(connection.fileno(), select.POLLIN)
    except (OSError, ValueError):  # closed here already
        return False
    if not poll.poll(0):
        return True
    if isinstance(connection, ssl.SSLSocket):
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) != b""  # readable: b"" is the client's close
    except OSError:
        return False


def _loopback(peer: str) -> bool:
    try:
        return ipaddress.ip_address(peer.removeprefix("::ffff:")).is_loopback
    except ValueError:
        return False


def _error(status: int, detail: str) -> AdminResponse:
    return AdminResponse(status, atom.render_error(status, detail), atom.ERROR_CONTENT_TYPE)


class _Unavailable(BrokerError):
    amqp_condition = "com.microsoft:server-busy"
    http_status = 503
