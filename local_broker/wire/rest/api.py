"""The HTTP data plane of one namespace: Service Bus's REST messaging operations -> engine calls.

Routes (entity: a queue or topic path; a receiver path: a queue or `{topic}/subscriptions/{name}`):

    POST   /{entity}/messages                          Send Message (201); a JSON batch with
                                                       Content-Type application/vnd.microsoft.servicebus.json
    POST   /{receiver}/messages/head?timeout=N         Peek-Lock: 201 + message, 204 when none within N s
    DELETE /{receiver}/messages/head?timeout=N         Receive and Delete: 200 + message, 204 when none
    PUT    /{receiver}/messages/{id|seq}/{lock-token}  Unlock (200)
    DELETE /{receiver}/messages/{id|seq}/{lock-token}  Delete, i.e. complete (200)
    POST   /{receiver}/messages/{id|seq}/{lock-token}  Renew-Lock (200)

Authorization is the management port's: a SAS token with Send (sending) or Listen (the rest) for the
entity. Errors are the engine's, with its HTTP status, in Service Bus's `<Error>` body; 503 while the
namespace is down by fault injection. The message lock is found by its token; the id segment (Location's:
the MessageId, else the SequenceNumber; either is accepted) must name the message it locks, else 404.
Sessions: a message carries its SessionId (BrokerProperties) on send; receiving from a session-enabled
entity is refused here as on AMQP without a session filter: Service Bus's REST API has no session
receivers (nor dead-lettering or deferral by lock).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from local_broker.auth import LISTEN, SEND, NamespaceAuth
from local_broker.engine import (
    ArgumentError,
    BrokerError,
    EntityNotFoundError,
    Message,
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    ReceiveMode,
    ServerBusyError,
)
from local_broker.faults import FaultState, NamespaceFaults
from local_broker.wire.admin import atom
from local_broker.wire.admin.operations import AdminResponse as Answer
from local_broker.wire.rest import properties
from local_broker.wire.rest.heads import HeadRequests, Outcome, Parked
from local_broker.wire.rest.tally import RestRequests

log = logging.getLogger("local_broker.rest")
MESSAGES = "messages"
HEAD = "head"
DEFAULT_TIMEOUT_S = 60.0  # a head request's wait when it names no timeout
MAX_TIMEOUT_S = 3600.0
XML = atom.ERROR_CONTENT_TYPE  # what Service Bus answers a send, and errors, as


@dataclass(frozen=True)
class Route:
    operation: str  # send | peek_lock | receive_and_delete | unlock | complete | renew
    entity: str  # the path before /messages
    message: str = ""  # id or sequence number segment
    lock_token: uuid.UUID | None = None


def route(method: str, segments: list[str]) -> Route | None:
    """The messaging operation a request names, None when it is not one (the management API's then)."""
    lowered = [s.lower() for s in segments]
    if len(segments) >= 2 and lowered[-1] == MESSAGES and method == "POST":
        return Route("send", "/".join(segments[:-1]))
    if len(segments) >= 3 and lowered[-2:] == [MESSAGES, HEAD] and method in ("POST", "DELETE"):
        return Route("peek_lock" if method == "POST" else "receive_and_delete", "/".join(segments[:-2]))
    if len(segments) >= 4 and lowered[-3] == MESSAGES and method in ("PUT", "DELETE", "POST"):
        try:
            token = uuid.UUID(segments[-1])
        except ValueError:
            return None
        operation = {"PUT": "unlock", "DELETE": "complete", "POST": "renew"}[method]
        return Route(operation, "/".join(segments[:-3]), segments[-2], token)
    return None


# Learn's REST pages answer some errors with other codes than the engine's (the management API's): a
# missing queue, topic or subscription is 410 Gone; a lock or message that is not there (expired, settled,
# unlocked) is 404 Not Found; a message too large is 403, as a quota.
REST_STATUS: dict[type[BrokerError], int] = {
    EntityNotFoundError: 410,
    MessageLockLostError: 404,
    MessageNotFoundError: 404,
    MessageSizeExceededError: 403,
}


def error_answer(exc: BrokerError) -> Answer:
    status = REST_STATUS.get(type(exc), exc.http_status)
    return Answer(status, atom.render_error(status, exc.description), XML)


class MessagingApi:
    """Answers the messaging routes of one namespace (see the module docstring)."""

    def __init__(self, namespace_name: str, auth: NamespaceAuth, faults: NamespaceFaults,
                 call: Callable[[Callable[[], Any]], Any], heads: HeadRequests,
                 clock: Callable[[], float] = time.time) -> None:
        """`call(fn)`: runs `fn` on the reactor, returns its result once committed (EngineThread.call)."""
        self.namespace_name = namespace_name
        self.auth = auth
        self.faults = faults
        self.call = call
        self.heads = heads
        self.ns = heads.ns
        self.clock = clock
        self.requests = RestRequests()  # requests, failures and latencies since the broker started (/metrics)
        faults.on_change(self._on_fault_change)

    def respond(self, request: Route, query: dict[str, str], headers: dict[str, str], body: bytes,
                base_url: str, connection_open: Callable[[], bool] = lambda: True) -> Answer | Parked:
        """The answer (or, for a long poll, a `Parked` answer to come), counted in `requests`; never raises.
        `connection_open()`: whether the client still waits (see `Parked`)."""
        started = time.perf_counter()
        failure: BrokerError | None = None
        try:
            answer = self._respond(request, query, headers, body, base_url, connection_open, started)
        except BrokerError as exc:
            failure, answer = exc, error_answer(exc)
        except Exception:
            log.exception("messaging request %s on %s failed", request.operation, request.entity)
            failure = BrokerError("The broker failed to process the request.")
            answer = error_answer(failure)
        if isinstance(answer, Answer):
            self.requests.answered(request.operation, answer.status, failure, started)
        return answer

    def _respond(self, request: Route, query: dict[str, str], headers: dict[str, str], body: bytes,
                 base_url: str, connection_open: Callable[[], bool], started: float) -> Answer | Parked:
        state = self.faults.state
        if state.namespace_down is not None:
            raise self._down(state)
        if state.latency_ms:
            time.sleep(state.latency_seconds)
        claim = self.auth.verify_header(
            next((v for k, v in headers.items() if k.lower() == "authorization"), None), self.clock())
        claim.require(request.entity, SEND if request.operation == "send" else LISTEN)
        if request.operation == "send":
            return self._send(request.entity, headers, body)
        if request.operation in ("peek_lock", "receive_and_delete"):
            return self._head(request, query, f"{base_url}/{quote(request.entity)}/{MESSAGES}",
                              connection_open, started)
        return self._settle(request)

    def _send(self, entity: str, headers: dict[str, str], body: bytes) -> Answer:
        lowered = {k.lower(): v for k, v in headers.items()}
        content_type = lowered.get("content-type")
        if (content_type or "").split(";")[0].strip().lower() == properties.BATCH_CONTENT_TYPE:
            batch = properties.batch_from(body)
        else:
            broker = properties.broker_properties_of(lowered.get("brokerproperties"))
            batch = [properties.message_from(body, broker, properties.custom_properties(headers),
                                             content_type)]
        self.call(lambda: self.ns.send(entity, batch))  # a scheduled one waits for its time there
        return Answer(201, b"", XML)

    def _head(self, request: Route, query: dict[str, str], lock_path: str,
              connection_open: Callable[[], bool], started: float) -> Answer | Parked:
        timeout = _timeout(query.get("timeout"))
        peek_lock = request.operation == "peek_lock"
        mode = ReceiveMode.PEEK_LOCK if peek_lock else ReceiveMode.RECEIVE_AND_DELETE
        parked = Parked(connection_open)

        def finish(outcome: Outcome) -> None:  # on the reactor, after the commit
            answer = self._head_answer(outcome, peek_lock, lock_path)
            failure = outcome if isinstance(outcome, BrokerError) else None
            self.requests.answered(request.operation, answer.status, failure, started)
            parked.settle(answer)

        taken = self.call(lambda: self.heads.take(request.entity, mode, timeout, finish, parked))
        if taken is not None:
            return self._head_answer(taken, peek_lock, lock_path)
        return parked if timeout > 0 else Answer(204, b"")

    @staticmethod
    def _head_answer(outcome: Outcome, peek_lock: bool, lock_path: str) -> Answer:
        if outcome is None:
            return Answer(204, b"")
        if isinstance(outcome, BrokerError):
            return error_answer(outcome)
        content_type = outcome.content_type
        return Answer(201 if peek_lock else 200, properties.payload_of(outcome.body),
                      str(content_type) if content_type else "application/octet-stream",
                      properties.response_headers(outcome, lock_path if peek_lock else None))

    def _settle(self, request: Route) -> Answer:
        tokens = [request.lock_token]
        entity = request.entity
        settle = {"complete": lambda: self.ns.complete(entity, tokens),
                  "unlock": lambda: self.ns.abandon(entity, tokens),
                  "renew": lambda: self.ns.renew_lock(entity, tokens)}[request.operation]

        def named_then_settled() -> None:  # one reactor call: the lock cannot change in between
            if not _names(request.message, self.ns.locked_message(entity, request.lock_token)):
                raise MessageLockLostError()  # the lock locks another message: Service Bus finds none, 404
            settle()

        self.call(named_then_settled)
        return Answer(200, b"")

    def _on_fault_change(self, old: FaultState, new: FaultState) -> None:
        """The namespace going down answers its parked long polls with 503 (as it drops AMQP links)."""
        if new.namespace_down is not None and old.namespace_down is None:
            down = self._down(new)
            self.call(lambda: self.heads.answer_all(down))

    def _down(self, state: FaultState) -> ServerBusyError:
        return ServerBusyError(state.unavailable(self.namespace_name))


def _names(segment: str, m: Message) -> bool:
    """Whether a lock URL's message segment names `m`: by its MessageId or its SequenceNumber (Learn)."""
    return segment == str(m.sequence_number) or (bool(m.message_id) and segment == str(m.message_id))


def _timeout(text: str | None) -> float:
    if text is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise ArgumentError(f"The timeout '{text}' is not a number of seconds.", "timeout") from None
    if not 0 <= value <= MAX_TIMEOUT_S:
        raise ArgumentError(f"The timeout must be 0 to {MAX_TIMEOUT_S:.0f} seconds, not {text}.", "timeout")
    return value
