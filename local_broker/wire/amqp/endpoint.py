"""The AMQP endpoint of one namespace: proton events -> engine calls -> frames. No Service Bus semantics.

Links by what the client attaches:
- `$cbs` pair: put-token; the verified claim authorizes the connection's later attaches.
- `<entity>/$management` pair: request/response operations (management.py).
- a sender to an entity: each transfer (or batch) is one `send`; `accepted` goes out after the commit.
- a receiver from an entity (optionally a session): credit-driven; the engine says when an entity has
  messages (`on_available`), the endpoint feeds links with credit at the end of the reactor turn.
Settlement of deliveries the broker sent is applied to the engine and echoed (settled) after the commit.
Every refusal or failure carries the engine error's condition and description in a 3-field AMQP error.
"""

from __future__ import annotations

import logging
import struct
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

from proton import Connection, Delivery, Described, Endpoint, Handler, Link, symbol, ulong

from local_broker.auth import LISTEN, SEND, Claim, NamespaceAuth
from local_broker.engine import (
    BrokerError,
    OperationTimeoutError,
    ReceiveMode,
    SessionLockLostError,
    StoreWriteError,
)
from local_broker.faults import NamespaceFaults
from local_broker.wire.amqp import compat, management, messages, native
from local_broker.wire.amqp.codec import MessageDecodeError
from local_broker.wire.amqp.logs import log_event
from local_broker.wire.amqp.reactor import BrokerDelivery, EngineThread
from local_broker.wire.amqp.tally import Histogram, Requests

_LIB = compat.LIB
# proton's C calls, bound once: reading one from cffi's lib object costs ~225 instructions a time
pn_decref = _LIB.pn_decref
pn_delivery_settle = _LIB.pn_delivery_settle
pn_event_link = _LIB.pn_event_link
pn_link_credit = _LIB.pn_link_credit
pn_link_drained = _LIB.pn_link_drained
pn_link_get_drain = _LIB.pn_link_get_drain
pn_link_state = _LIB.pn_link_state
LOCAL_ACTIVE = Endpoint.LOCAL_ACTIVE

log = logging.getLogger("local_broker.amqp")

CBS_NODE = "$cbs"
MANAGEMENT_SUFFIX = "/$management"
SESSION_FILTER = symbol("com.microsoft:session-filter")
SESSION_TIMEOUT = symbol("com.microsoft:timeout")
LOCKED_UNTIL_UTC = symbol("com.microsoft:locked-until-utc")
MAX_BATCH_SIZE = symbol("com.microsoft:max-message-batch-size")
INCOMING_CREDIT = 1000
DEFAULT_SESSION_WAIT_S = 60.0
MAX_CONNECTIONS = 5000  # AMQP connections per namespace, as Service Bus Basic/Standard allows
MAX_UNROUTED_REPLIES = 100  # per connection: replies kept for a reply link the client has yet to attach


class Node(Enum):
    CBS = "cbs"
    MANAGEMENT = "management"
    SENDER = "sender"  # the client sends to an entity (the broker's link is a receiver)
    RECEIVER = "receiver"  # the client receives from an entity


@dataclass(eq=False)
class LinkState:
    node: Node
    connection: ConnectionState
    path: str = ""  # canonical entity path for SENDER/RECEIVER, node address for CBS/MANAGEMENT
    mode: ReceiveMode = ReceiveMode.PEEK_LOCK
    session: Any = None  # the engine's SessionLock of a session receiver
    wanted_session: str | None = None
    session_filter_descriptor: Any = None  # set when the client sent its session filter as a described value
    wait_deadline: float | None = None  # NEXT_AVAILABLE receivers waiting for a session (time.monotonic)
    tag_counter: int = 0


@dataclass(slots=True)
class UnroutedReply:
    """A `$cbs`/`$management` reply whose reply link the client has not attached yet."""

    request_link: Link
    reply_to: str | None
    payload: bytes


@dataclass(eq=False)
class ConnectionState:
    peer: str
    sasl_claim: Claim | None
    sasl_mechanism: str
    transfer_formats: compat.IncomingFrames  # the connection's transport reads them from its frames
    claims: list[Claim] = field(default_factory=list)
    container_id: str = ""
    closing: bool = False  # the broker closed it: it takes no more transfers
    counted: bool = False  # holds one of the namespace's connection quota
    unrouted: list[UnroutedReply] = field(default_factory=list)

    def authorizes(self, path: str, right: str) -> bool:
        now = time.time()
        if self.sasl_claim is not None and self.sasl_claim.authorizes(path, right):
            return True
        return any(c.authorizes(path, right) and (c.expires_at is None or c.expires_at > now)
                   for c in self.claims)


def entity_address(address: str | None) -> str:
    """`amqps://host:port/q1/$management` -> `q1` (scheme, authority, leading / and node suffix removed)."""
    path = address or ""
    if "://" in path:
        path = urlsplit(path).path
    path = path.strip("/")
    if path.lower().endswith(MANAGEMENT_SUFFIX):
        path = path[: -len(MANAGEMENT_SUFFIX)]
    return path


class NamespaceEndpoint(Handler):
    """proton handler of every connection accepted for one namespace."""

    def __init__(self, name: str, namespace: Any, auth: NamespaceAuth, engine_thread: EngineThread,
                 faults: NamespaceFaults | None = None, sync: Callable[[], None] | None = None,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        super().__init__()
        self.name = name
        self.max_connections = max_connections
        self.open_connections = 0
        self.connections_opened = self.connections_closed = 0  # since the broker started (/metrics)
        self.requests = Requests()  # requests, failures and latencies since the broker started (/metrics)
        self.sync = sync  # makes the last commit survive power loss (see `commit`)
        self.new_data = False  # this turn accepted messages or management changes
        self.faults = faults or NamespaceFaults()
        self.ns = namespace
        self.auth = auth
        self.thread = engine_thread
        self.management = management.Management(namespace)
        self.receivers: dict[str, set[Link]] = defaultdict(set)  # canonical path -> broker sender links
        self.waiting: dict[str, set[Link]] = defaultdict(set)  # NEXT_AVAILABLE receivers by entity path
        self.ready: set[Link] = set()  # receiver links to feed at the end of the turn
        self.ready_paths: set[str] = set()
        self.connections: set[Connection] = set()
        self.replies: list[tuple[Callable[[], None], Callable[[BrokerError], None] | None]] = []
        calls = native.bound() or native  # the C module's twins of native.py's reference, or that reference
        self.delivery_in = calls.delivery_in
        self.delivery_event = calls.delivery_event
        self.flow_event = calls.flow_event
        self.keep_unsettled = calls.keep_unsettled
        self.settle_all = calls.settle_all
        self.send_raw = calls.send_raw
        self.echoes: list[Any] = []  # C deliveries whose settlement is echoed after the commit (referenced)
        self.accepts: list[Any] = []  # C deliveries of sends accepted after the commit (referenced)
        self.failure: BrokerError | None = None  # why the last commit failed
        self.turn = engine_thread.turn
        namespace.on_available(self._on_available)
        namespace.on_session_lost(self._on_session_lost)
        engine_thread.participants.append(self)
        engine_thread.hand_out(type(self))

    # --- turn participation (reactor.py) -----------------------------------------------------------
    def before_commit(self) -> None:
        if not self.ready_paths and not self.ready:  # a turn of settlements: nothing to feed
            return
        paths, self.ready_paths = self.ready_paths, set()
        for path in paths:
            self.ready.update(self.receivers.get(path, ()))
            for link in list(self.waiting.get(path, ())):
                self._try_accept_session(link)
        links, self.ready = self.ready, set()
        for link in links:
            self._feed(link)

    def commit(self) -> None:
        """Commit the turn; with `sync`, also flush it to disk when it holds data a client was promised.

        Sends, scheduled messages, management and admin changes are acknowledged only once they would
        survive power loss. Settlements and receives are only committed (they survive a killed broker):
        losing one to power loss makes a message come back, which at-least-once delivery allows, and
        skipping their flush saves one disk sync per settled message for clients that settle one by one.
        If the store fails (a full disk, an I/O error), the engine is back at its last commit and every
        operation of the turn is answered with the error instead (`failure`, for `EngineThread.call`).
        """
        replies, self.replies = self.replies, []
        echoes, self.echoes = self.echoes, []
        accepts, self.accepts = self.accepts, []
        new_data, self.new_data = self.new_data, False
        self.failure = None
        try:
            self.ns.commit()
            if self.sync is not None and (new_data or self.thread.external_changes):
                self.sync()
        except (BrokerError, OSError) as exc:
            self.failure = exc if isinstance(exc, BrokerError) else StoreWriteError(
                f"The namespace's store could not be synced to disk: {exc}. Retry.")
            log_event(log, logging.ERROR, "commit-failed", namespace=self.name,
                      error=self.failure.description, operations=len(replies) + len(echoes) + len(accepts))
            self.ready_paths.update(self.receivers)  # messages handed out this turn are available again
            self.turn.rearm = True  # the engine is back at its last commit, its deadlines with it
        for action, refuse in replies:
            if self.failure is None or refuse is None:
                self._after_commit(action)
            else:
                refuse(self.failure)
        requests, started = self.requests, self.turn.started
        for outcome, deliveries, latency in ((0, echoes, requests.settle_latency),
                                             (Delivery.ACCEPTED, accepts, requests.send_latency)):
            if not deliveries:
                continue
            if self.failure is None:
                self._after_commit(lambda outcome=outcome, deliveries=deliveries, latency=latency: _answer(
                    self.settle_all, deliveries, outcome, latency, started))
            else:
                _refuse(deliveries, self.failure)
                for _ in deliveries:
                    requests.failed(self.failure)

    def next_deadline(self) -> float | None:
        return self.ns.next_deadline()

    def tick(self) -> None:
        try:
            self.ns.tick()
        except BrokerError as exc:
            log_event(log, logging.ERROR, "tick-failed", namespace=self.name, error=exc.description)
        self.expire_waiters()

    def expire_waiters(self) -> None:
        """Refuse NEXT_AVAILABLE receivers whose `com.microsoft:timeout` ran out with no session. Deadlines
        are on the loop's clock (monotonic), so the timer set at the attach never finds its own receiver a
        hair short of due and leaves it waiting for some later tick."""
        now = time.monotonic()
        for path, links in list(self.waiting.items()):
            for link in list(links):
                state: LinkState = link.sb
                if state.wait_deadline is not None and state.wait_deadline <= now:
                    links.discard(link)
                    state.wait_deadline = None
                    compat.refuse_link(link, OperationTimeoutError.amqp_condition,
                                       f"No session available to accept on '{path}' within the timeout.")

    def _on_available(self, path: str) -> None:
        self.ready_paths.add(path)

    def _on_session_lost(self, owner: Any) -> None:
        """A session lock expired unrenewed: its receiver is detached with `com.microsoft:session-lock-lost`,
        as Service Bus does (the SDKs then fail what they settle there instead of retrying on that link)."""
        if not isinstance(owner, LinkState):
            return
        link = next((link for link in self.receivers.get(owner.path, ()) if link.sb is owner), None)
        if link is None:
            return
        owner.session = None  # the engine has unlocked it already: nothing to release
        self._forget_link(link)
        lost = SessionLockLostError()
        link.condition = compat.error(lost.amqp_condition, lost.description)
        link.close()

    def close(self) -> None:
        for connection in list(self.connections):
            if connection.state & Endpoint.LOCAL_ACTIVE:
                connection.sb.closing = True
                connection.close()

    def drop_connections(self) -> None:
        """Fault injection (namespace down, mode drop): every open connection is closed by the broker."""
        for connection in list(self.connections):
            if connection.state & Endpoint.LOCAL_ACTIVE:
                reason = f"The namespace '{self.name}' is unavailable (fault injection)."
                connection.condition = compat.error("amqp:connection:forced", reason)
                connection.sb.closing = True
                connection.close()
                # Its receivers end now, not when the client reads the close: until then they would still
                # be fed (and lock messages no one can take).
                self._forget_links(connection)

    def respond(self, action: Callable[[], None],
                refuse: Callable[[BrokerError], None] | None = None) -> None:
        """Send a response after this turn's commit; if the commit fails, `refuse(error)` instead (without
        `refuse` the response goes anyway: it promised nothing the commit had to keep)."""
        self.replies.append((action, refuse))

    def _after_commit(self, action: Callable[[], None]) -> None:
        delay = self.faults.state.latency_seconds  # a fault adds latency to every answer
        if delay:
            self.thread.after_commit.append(lambda: self.thread.later(delay, action))
        else:
            self.thread.after_commit.append(action)

    # --- connections ----------------------------------------------------------------------------------
    def accept_connection(
        self, connection: Connection, claim: Claim | None, peer: str, mechanism: str
    ) -> None:
        """Called by the SASL listener when a socket is handed to proton."""
        connection.sb = ConnectionState(peer=peer, sasl_claim=claim, sasl_mechanism=mechanism,
                                        transfer_formats=connection.transport.transfer_formats)
        self.connections.add(connection)

    def on_connection_remote_open(self, event) -> None:
        connection = event.connection
        state: ConnectionState = connection.sb
        state.container_id = connection.remote_container or ""
        connection.container = "sbfed-" + self.name
        connection.open()
        if self.open_connections >= self.max_connections:
            self._refuse_connection(connection)
            return
        state.counted = True
        self.open_connections += 1
        self.connections_opened += 1
        log_event(log, logging.INFO, "connection-open", namespace=self.name, peer=state.peer,
                  container=state.container_id, sasl=state.sasl_mechanism)

    def _refuse_connection(self, connection: Connection) -> None:
        """Over the connection quota: opened and closed at once with the error Service Bus sends."""
        description = (f"ConnectionsQuotaExceeded: the namespace '{self.name}' already has "
                       f"{self.open_connections} AMQP connections, its maximum.")
        connection.condition = compat.error("amqp:resource-limit-exceeded", description)
        connection.sb.closing = True
        connection.close()
        log_event(log, logging.WARNING, "connection-refused", namespace=self.name, peer=connection.sb.peer,
                  reason="ConnectionsQuotaExceeded", limit=self.max_connections)

    def on_session_remote_open(self, event) -> None:
        event.session.open()

    def on_session_remote_close(self, event) -> None:
        event.session.close()

    def on_connection_remote_close(self, event) -> None:
        connection = event.connection
        condition = connection.remote_condition
        if condition is not None:
            log_event(log, logging.WARNING, "connection-error", namespace=self.name,
                      peer=connection.sb.peer, condition=condition.name, description=condition.description)
        connection.close()

    def on_transport_error(self, event) -> None:
        condition = event.transport.condition
        connection = event.connection
        if condition is None or connection is None or _harmless(condition):
            return
        log_event(log, logging.WARNING, "transport-error", namespace=self.name, peer=connection.sb.peer,
                  condition=condition.name, description=condition.description)

    def on_transport_closed(self, event) -> None:
        connection = event.connection
        if connection is None or connection not in self.connections:
            return
        self.connections.discard(connection)
        if connection.sb.counted:
            self.open_connections -= 1
            self.connections_closed += 1
        self._forget_links(connection)
        connection.sb.unrouted.clear()  # they hold links: a cycle through proton's C objects GC cannot see
        log_event(log, logging.INFO, "connection-close", namespace=self.name, peer=connection.sb.peer,
                  container=connection.sb.container_id)

    # --- links ----------------------------------------------------------------------------------------
    def on_link_remote_open(self, event) -> None:
        link: Link = event.link
        if not link.state & Endpoint.LOCAL_UNINIT:
            return
        address = (link.remote_target if link.is_receiver else link.remote_source).address
        self.requests.incoming += 1
        try:
            if address == CBS_NODE or (address or "").lower().endswith(MANAGEMENT_SUFFIX):
                self._open_node(link, address)
            elif link.is_receiver:
                self._open_sender_link(link, address)
            else:
                self._open_receiver_link(link, address)
        except BrokerError as exc:
            self.requests.failed(exc)
            link.sb = None
            compat.refuse_link(link, exc.amqp_condition, exc.description)
            log_event(log, logging.INFO, "link-refused", namespace=self.name, peer=link.connection.sb.peer,
                      address=address, condition=exc.amqp_condition)

    def _authorize(self, link: Link, path: str, right: str) -> None:
        if not link.connection.sb.authorizes(path, right):
            raise management.unauthorized(right, path)

    def _open_node(self, link: Link, address: str) -> None:
        node = Node.CBS if address == CBS_NODE else Node.MANAGEMENT
        path = address if node is Node.CBS else self.ns.resolve(entity_address(address))
        link.sb = LinkState(node=node, connection=link.connection.sb, path=path)
        compat.echo_attach(link)
        link.max_message_size = self.ns.config.max_message_size_in_kilobytes * 1024
        link.open()
        if link.is_receiver:
            link.flow(INCOMING_CREDIT)
        elif link.sb.connection.unrouted:
            self._route_unrouted(link.sb.connection)

    def _open_sender_link(self, link: Link, address: str) -> None:
        path = self.ns.resolve(entity_address(address))
        self._authorize(link, path, SEND)
        self.ns.check_sender(path)
        link.sb = LinkState(node=Node.SENDER, connection=link.connection.sb, path=path)
        compat.echo_attach(link)
        size = self.ns.max_message_size(path)  # what the engine enforces; a batch travels as one message
        link.max_message_size = size
        link.properties = {MAX_BATCH_SIZE: ulong(size)}
        link.open()
        link.flow(INCOMING_CREDIT)

    def _open_receiver_link(self, link: Link, address: str) -> None:
        path = self.ns.resolve(entity_address(address))
        self._authorize(link, path, LISTEN)
        filters = compat.read_filter(link.remote_source) or {}
        sessionful = SESSION_FILTER in filters
        self.ns.check_receiver(path, sessionful=sessionful)
        presettled = link.remote_snd_settle_mode == Link.SND_SETTLED
        state = LinkState(node=Node.RECEIVER, connection=link.connection.sb, path=path,
                          mode=ReceiveMode.RECEIVE_AND_DELETE if presettled else ReceiveMode.PEEK_LOCK)
        link.sb = state
        compat.echo_attach(link)
        link.max_message_size = self.ns.max_message_size(path)
        if not sessionful:
            self._activate_receiver(link)
            return
        wanted = filters.get(SESSION_FILTER)
        if isinstance(wanted, Described):  # go-amqp describes filter values (azservicebus: 0x137000000c)
            state.session_filter_descriptor, wanted = wanted.descriptor, wanted.value
        state.wanted_session = None if wanted is None else str(wanted)
        if state.wanted_session is None:
            timeout_ms = (link.remote_properties or {}).get(SESSION_TIMEOUT)
            wait = DEFAULT_SESSION_WAIT_S if timeout_ms is None else int(timeout_ms) / 1000
            state.wait_deadline = time.monotonic() + wait
            self.waiting[path].add(link)
            if not self._try_accept_session(link):
                self.thread.later(wait, self.expire_waiters)
            return
        state.session = self.ns.accept_session(path, state.wanted_session, state)
        self._activate_receiver(link)

    def _try_accept_session(self, link: Link) -> bool:
        """A NEXT_AVAILABLE receiver takes a session when one frees up; until its timeout it waits."""
        state: LinkState = link.sb
        try:
            state.session = self.ns.accept_session(state.path, None, state)
        except OperationTimeoutError:
            return False
        except BrokerError as exc:
            self.requests.failed(exc)
            self.waiting[state.path].discard(link)
            compat.refuse_link(link, exc.amqp_condition, exc.description)
            return True
        self.waiting[state.path].discard(link)
        state.wait_deadline = None
        self._activate_receiver(link)
        return True

    def _activate_receiver(self, link: Link) -> None:
        state: LinkState = link.sb
        compat.echo_attach(link)
        if state.session is not None:
            session_id = state.session.session_id
            if state.session_filter_descriptor is not None:  # answered in the form it was asked
                session_id = Described(state.session_filter_descriptor, session_id)
            compat.write_filter(link.source, {SESSION_FILTER: session_id})
            link.properties = {LOCKED_UNTIL_UTC: compat.dotnet_ticks(state.session.locked_until)}
        link.open()
        self.receivers[state.path].add(link)
        if link.credit > 0:
            self.ready.add(link)

    def on_link_remote_close(self, event) -> None:
        link = event.link
        self._forget_link(link)
        if link.state & Endpoint.LOCAL_ACTIVE:
            link.close()

    def _forget_links(self, connection: Connection) -> None:
        link = connection.link_head(0)
        while link:
            self._forget_link(link)
            link = link.next(0)

    def _forget_link(self, link: Link) -> None:
        state: LinkState | None = getattr(link, "sb", None)
        if state is None or state.node is not Node.RECEIVER:
            return
        link.sb = None
        self.receivers[state.path].discard(link)
        self.waiting[state.path].discard(link)
        self.ready.discard(link)
        if state.session is not None:
            try:
                self.ns.release_session(state.path, state.session.session_id, state)
            except BrokerError as exc:
                log_event(log, logging.INFO, "session-release-failed", namespace=self.name,
                          error=exc.description)
            state.session = None  # the lock names this state its owner: no cycle is left to collect

    def on_link_flow(self, event: Any) -> None:
        """A client's credit: its receiver is fed at the end of the turn. `event` is proton's C event
        (reactor.dispatch_event): the SDKs send one flow per receive, and proton raises one more when the
        broker's transfers have used the credit up, which needs nothing (`Guarded`: a flow is activity only
        when it readies a receiver)."""
        found = self.flow_event(event)  # None: no credit, or not a link the broker opened
        if found is not None and found[1].node is Node.RECEIVER:
            self.ready.add(Link.wrap(found[0]))
            self.turn.activity = self.turn.rearm = True

    def _feed(self, link: Link) -> None:
        """Send as many messages as the link has credit for; honour drain. Read through proton's C calls
        (the wrapper's properties and attribute lookups cost more than the calls themselves)."""
        impl = link._impl
        state: LinkState | None = link._attrs.get("sb")
        if state is None or not pn_link_state(impl) & LOCAL_ACTIVE or state.node is not Node.RECEIVER:
            return
        credit = pn_link_credit(impl)
        if credit > 0:
            try:
                batch = self.ns.receive(state.path, credit, state.mode, session=state.session)
            except BrokerError as exc:
                self._detach(link, exc)
                return
            peek_lock = state.mode is ReceiveMode.PEEK_LOCK
            send_raw = self.send_raw
            if batch:
                self.turn.rearm = True  # new locks (or an entity's idle time) to watch
            for msg in batch:
                payload = messages.encode_message(msg, with_lock=peek_lock and state.session is None)
                if peek_lock:
                    send_raw(impl, msg.lock_token.bytes_le, payload, False)
                else:
                    state.tag_counter += 1
                    send_raw(impl, struct.pack(">Q", state.tag_counter), payload, True)
        if pn_link_get_drain(impl) and pn_link_credit(impl) > 0:
            pn_link_drained(impl)

    def _detach(self, link: Link, exc: BrokerError) -> None:
        self._forget_link(link)
        link.condition = compat.error(exc.amqp_condition, exc.description)
        link.close()

    # --- deliveries -------------------------------------------------------------------------------------
    def on_delivery(self, event: Any) -> None:
        """A transfer from the client, or its disposition of one the broker sent; `event` is proton's C
        event (reactor.dispatch_event). The hot paths (a send, a settlement) run on proton's C objects: no
        Python wrapper for the event, the delivery or the link. A complete (the commonest settlement)
        only removes deadlines; everything else may bring one nearer (`Turn.rearm`)."""
        state: LinkState | None
        delivery, link, state = self.delivery_event(event)
        # a connection the broker closed (e.g. fault injection) takes nothing more: no more credit
        closing = state is not None and state.connection.closing
        payload = self.delivery_in(link, delivery, 0 if closing else INCOMING_CREDIT)
        if type(payload) is tuple:
            self._on_disposition(delivery, state, *payload)
            return
        self.turn.rearm = True
        if payload is False:
            return
        message_format = 0 if state is None else state.connection.transfer_formats.take(link, delivery)
        if closing:
            return
        if state is None:
            compat.reject(delivery, "amqp:not-allowed", "The link is not attached to an entity.")
        elif state.node is Node.SENDER:
            self._on_send(delivery, state, payload, message_format)
        else:
            self._on_request(BrokerDelivery(delivery), Link.wrap(link), state, payload)

    def _on_send(self, delivery: Any, state: LinkState, payload: bytes, message_format: int) -> None:
        self.requests.incoming += 1
        try:
            batch = messages.decode_transfer(payload, message_format)
            self.ns.send(state.path, batch)
        except MessageDecodeError as exc:
            self.requests.user_errors += 1
            compat.reject(delivery, "amqp:decode-error", str(exc))
            return
        except BrokerError as exc:
            self.requests.failed(exc)
            compat.reject(delivery, exc.amqp_condition, exc.description)
            self._log_refusal("send-rejected", state, exc)
            return
        self.new_data = True
        self.keep_unsettled(delivery, self.accepts)

    def _log_refusal(self, event: str, state: LinkState, exc: BrokerError) -> None:
        log_event(log, logging.INFO, event, namespace=self.name, peer=state.connection.peer,
                  entity=state.path, condition=exc.amqp_condition, description=exc.description)

    def _on_request(self, delivery: Delivery, link: Link, state: LinkState, payload: bytes) -> None:
        self.requests.incoming += 1
        try:
            request = management.parse_request(payload)
        except MessageDecodeError as exc:
            self.requests.user_errors += 1
            compat.reject(delivery._impl, "amqp:decode-error", str(exc))
            return
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
        connection_state: ConnectionState = link.connection.sb
        if state.node is Node.CBS:
            reply, claim = management.put_token(
                self.auth, request, lambda scope: self.ns.resolve(entity_address(scope)))
            if claim is not None:  # a refreshed token replaces the ones that have run out
                now = time.time()
                connection_state.claims = [c for c in connection_state.claims
                                           if c.expires_at is None or c.expires_at > now] + [claim]
            else:
                log_event(log, logging.WARNING, "cbs-refused", namespace=self.name,
                          peer=connection_state.peer, reason=reply.description)
            self.respond(lambda: self._reply(link, state, request, reply))
            return

        def authorize(path: str, right: str) -> None:
            # The node's own address: a token for the entity (or above) covers it by prefix, and so does
            # one for `<entity>/$management` itself, which the JS SDK signs for its management link.
            if not connection_state.authorizes(path + MANAGEMENT_SUFFIX, right):
                raise management.unauthorized(right, path)

        reply = self.management.handle(state.path, request, authorize)
        self.new_data = True
        self.respond(lambda: self._reply(link, state, request, reply),
                     lambda exc: self._reply(link, state, request, management.Reply(
                         exc.http_status, exc.description, condition=exc.amqp_condition)))

    def _reply(self, link: Link, state: LinkState, request: management.Request,
               reply: management.Reply) -> None:
        if reply.status >= 400:
            self.requests.answered(reply.status, reply.condition)
        payload = management.encode_reply(request, reply, cbs=state.node is Node.CBS)
        # The request's disposition leaves before its reply, as from Service Bus: proton may hold a
        # disposition back to merge it with later ones, and uAMQP-C fails a request answered before it is
        # settled ("Did not receive send confirmation"). Producing the output now writes it out.
        link.connection.transport.pending()
        target = _reply_link(link, request.reply_to)
        if target is None:  # the client attaches its reply link after sending (a pair in the other order)
            unrouted = state.connection.unrouted
            if len(unrouted) >= MAX_UNROUTED_REPLIES:  # a client that never attaches one: keep the newest
                del unrouted[0]
            unrouted.append(UnroutedReply(link, request.reply_to, payload))
            return
        _send_reply(target, payload)

    def _route_unrouted(self, connection: ConnectionState) -> None:
        """A reply link attached: send it the replies that were waiting for it."""
        waiting, connection.unrouted = connection.unrouted, []
        for entry in waiting:
            if not entry.request_link.state & Endpoint.LOCAL_ACTIVE:
                continue  # the client gave up on the request and detached
            target = _reply_link(entry.request_link, entry.reply_to)
            if target is None:
                connection.unrouted.append(entry)
            else:
                _send_reply(target, entry.payload)

    def _on_disposition(self, delivery: Any, state: LinkState | None, outcome: int, settled: bool,
                        tag: bytes) -> None:
        """The client settled (or set the outcome of) a delivery the broker sent; `delivery` is proton's C
        object, `outcome`, `settled` and `tag` its state (native.delivery_in). The outcome is applied to the
        engine and echoed after the commit."""
        if state is None or state.node is not Node.RECEIVER:  # replies on $cbs / $management links
            if outcome or settled:
                pn_delivery_settle(delivery)
            return
        if not outcome:
            if settled:  # settled without an outcome: nothing to apply
                pn_delivery_settle(delivery)
            return
        self.requests.incoming += 1
        token = messages.lock_token_of(tag)
        session_id = None if state.session is None else state.session.session_id
        if outcome != Delivery.ACCEPTED:  # the message may come back (a new deadline): see `on_delivery`
            self.turn.rearm = True
        try:
            if outcome == Delivery.ACCEPTED:
                self.ns.complete(state.path, [token], session_id=session_id)
            elif outcome == Delivery.RELEASED:
                self.ns.release(state.path, [token])
            elif outcome == Delivery.MODIFIED:
                remote = compat.remote_disposition(delivery)
                changes = remote.annotations
                changes = {str(k): messages.to_python(v) for k, v in changes.items()} if changes else None
                if remote.undeliverable:
                    self.ns.defer(state.path, [token], changes, session_id=session_id)
                else:
                    self.ns.abandon(state.path, [token], changes, session_id=session_id)
            elif outcome == Delivery.REJECTED:
                condition = compat.remote_disposition(delivery).condition
                reason, description, changes = _dead_letter_info(condition)
                self.ns.dead_letter(state.path, [token], reason, description, changes, session_id=session_id)
            else:
                pn_delivery_settle(delivery)
                return
        except BrokerError as exc:
            self.requests.failed(exc)
            if settled:
                pn_delivery_settle(delivery)
            else:
                compat.reject(delivery, exc.amqp_condition, exc.description)
            self._log_refusal("settlement-rejected", state, exc)
            return
        self.keep_unsettled(delivery, self.echoes)


def _dead_letter_info(condition: Any) -> tuple[str | None, str | None, dict[str, Any] | None]:
    """A `rejected` outcome's error info: DeadLetterReason, DeadLetterErrorDescription and the further
    properties to modify (.NET and Java put them all in one map), kept as the management path keeps them."""
    info = {str(k): v for k, v in (condition.info or {}).items()} if condition is not None else {}
    reason, description = info.pop("DeadLetterReason", None), info.pop("DeadLetterErrorDescription", None)
    changes = {k: messages.to_python(v) for k, v in info.items()} or None
    return (None if reason is None else str(reason),
            None if description is None else str(description), changes)


def _answer(settle_all: Callable[[list[Any], int], None], deliveries: list[Any], outcome: int,
            latency: Histogram, started: float) -> None:
    """Answer the turn's sends (or settlements), and count how long they waited since the loop read them."""
    settle_all(deliveries, outcome)
    latency.observe(time.perf_counter() - started, len(deliveries))


def _refuse(deliveries: list[Any], exc: BrokerError) -> None:
    for delivery in deliveries:
        compat.reject(delivery, exc.amqp_condition, exc.description)
        pn_decref(delivery)


def _reply_link(request: Link, reply_to: str | None) -> Link | None:
    """The client's receiver for the reply to a request made on `request`: the link `reply-to` names, by
    its name (JS CBS), its target address (.NET, Java, Go, JS management) or its source address (Python),
    else the one attached to the same node (Python CBS sends no reply-to); on the request's own AMQP
    session first, where every SDK attaches the pair."""
    state: LinkState = request.sb
    named: list[Link] = []
    same_node: list[Link] = []
    link = request.connection.link_head(Endpoint.LOCAL_ACTIVE)
    while link:
        other = getattr(link, "sb", None)
        if link.is_sender and other is not None and other.node is state.node:
            if reply_to is not None and reply_to in (
                    link.name, link.remote_target.address, link.remote_source.address):
                named.append(link)
            elif other.path == state.path:
                same_node.append(link)
        link = link.next(Endpoint.LOCAL_ACTIVE)
    candidates = named or same_node
    if not candidates:
        return None
    session = request.session
    return next((c for c in candidates if c.session == session), candidates[0])


def _send_reply(link: Link, payload: bytes) -> None:
    state: LinkState = link.sb
    state.tag_counter += 1
    # presettled when the client's reply link asked for that (go-amqp's RPC links do)
    settled = link.snd_settle_mode == Link.SND_SETTLED
    native.send_raw(link._impl, struct.pack(">Q", state.tag_counter), payload, settled)


def _harmless(condition: Any) -> bool:
    """pyamqp detaches $management links after `end`; proton objects to the unknown channel (pitfall 11)."""
    return condition.name == "amqp:not-allowed" and "no such channel" in (condition.description or "")
