"""`$management` and `$cbs` request/response nodes: request bodies -> engine calls -> reply bodies.

The shapes are those of servicebus-wire.md sections 1.4 and 8: a reply's `correlation-id` is the
request's `message-id` with its AMQP type kept (uuid, ulong, string), `$management` status keys are camelCase
(`statusCode`, `statusDescription`, `errorCondition`), `$cbs` ones are `status-code`/`status-description`;
status codes are AMQP ints, as Service Bus sends them (.NET and Java clients cast them to 32-bit integers).
A `BrokerError` becomes its HTTP status and AMQP condition: the SDK maps the condition to its exception.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proton import UNDESCRIBED, Array, Data, int32, symbol, timestamp

from local_broker.auth import LISTEN, SEND, Claim, NamespaceAuth
from local_broker.engine import ArgumentError, BrokerError, NotAllowedError, ReceiveMode, UnauthorizedError
from local_broker.wire.amqp import codec, messages, rules

OPERATION = "operation"


@dataclass(slots=True)
class Request:
    message_id: Any
    reply_to: str | None
    application_properties: dict[str, Any]
    body: Any


@dataclass(slots=True)
class Reply:
    status: int
    description: str
    body: Any = None
    condition: str | None = None


def parse_request(payload: bytes) -> Request:
    sections = codec.decode_sections(payload)
    props = sections.properties
    return Request(
        message_id=props.get("message_id"),
        reply_to=None if props.get("reply_to") is None else str(props["reply_to"]),
        application_properties={str(k): v for k, v in sections.application_properties.items()},
        body=codec.amqp_value(sections.body),
    )


def encode_reply(request: Request, reply: Reply, *, cbs: bool) -> bytes:
    if cbs:
        app = {"status-code": int32(reply.status), "status-description": reply.description}
    else:
        app = {"statusCode": int32(reply.status), "statusDescription": reply.description}
        if reply.condition:
            app["errorCondition"] = symbol(reply.condition)
    return codec.encode_amqp_value_message({"correlation_id": request.message_id}, app, reply.body)


# --- $cbs ---------------------------------------------------------------------------------------------

def put_token(auth: NamespaceAuth, request: Request,
              resolve: Callable[[str], object]) -> tuple[Reply, Claim | None]:
    """Verify a CBS put-token; the claim it yields authorizes this connection's links. A token whose
    audience names an entity that does not exist is refused with 404, as Service Bus does (the SDKs raise
    their authentication error); `resolve` raises EntityNotFoundError for such a path."""
    operation = request.application_properties.get(OPERATION)
    if operation != "put-token":
        return Reply(400, f"Unsupported CBS operation '{operation}'."), None
    try:
        claim = auth.verify_token(request.body, time.time())
        if claim.scope:
            resolve(claim.scope)
    except BrokerError as exc:
        return Reply(exc.http_status if exc.http_status == 404 else 401, exc.description), None
    return Reply(202, "Accepted"), claim


# --- $management --------------------------------------------------------------------------------------

def _array(values: Any) -> list[Any]:
    if values is None:
        return []
    return list(values.elements) if isinstance(values, Array) else list(values)


def _uuids(values: Any) -> list[uuid.UUID]:
    return [v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=bytes(v)) for v in _array(values)]


def _ms(epoch_seconds: float) -> timestamp:
    return timestamp(round(epoch_seconds * 1000))


def _epoch(value: Any) -> float:
    """An AMQP timestamp (milliseconds) as epoch seconds."""
    return int(value) / 1000


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _modifications(body: dict) -> dict[str, Any] | None:
    changes = body.get("properties-to-modify")
    return {str(k): messages.to_python(v) for k, v in changes.items()} if changes else None


class Management:
    """The `$management` operations of one namespace, each checked against the connection's rights."""

    def __init__(self, namespace: Any) -> None:
        self.ns = namespace
        self.operations: dict[str, tuple[str, Callable[[str, dict], Reply]]] = {
            "com.microsoft:renew-lock": (LISTEN, self.renew_lock),
            "com.microsoft:peek-message": (LISTEN, self.peek),
            "com.microsoft:schedule-message": (SEND, self.schedule),
            "com.microsoft:cancel-scheduled-message": (SEND, self.cancel_scheduled),
            "com.microsoft:receive-by-sequence-number": (LISTEN, self.receive_by_sequence_number),
            "com.microsoft:update-disposition": (LISTEN, self.update_disposition),
            "com.microsoft:renew-session-lock": (LISTEN, self.renew_session_lock),
            "com.microsoft:get-session-state": (LISTEN, self.get_session_state),
            "com.microsoft:set-session-state": (LISTEN, self.set_session_state),
            "com.microsoft:get-message-sessions": (LISTEN, self.get_message_sessions),
            "com.microsoft:batch-delete-messages": (LISTEN, self.batch_delete),
            "com.microsoft:add-rule": (LISTEN, self.add_rule),
            "com.microsoft:enumerate-rules": (LISTEN, self.enumerate_rules),
            "com.microsoft:remove-rule": (LISTEN, self.remove_rule),
        }

    def handle(self, path: str, request: Request, authorize: Callable[[str, str], None]) -> Reply:
        operation = str(request.application_properties.get(OPERATION))
        entry = self.operations.get(operation)
        if entry is None:
            return Reply(501, f"The operation '{operation}' is not supported.",
                         condition="amqp:not-implemented")
        right, handler = entry
        body = request.body if isinstance(request.body, dict) else {}
        body = {str(k): v for k, v in body.items()}
        try:
            authorize(path, right)
            return handler(path, body)
        except BrokerError as exc:
            return Reply(exc.http_status, exc.description, condition=exc.amqp_condition)
        except (KeyError, TypeError, ValueError) as exc:
            error = ArgumentError(f"Malformed '{operation}' request: {exc}")
            return Reply(error.http_status, error.description, condition=error.amqp_condition)

    def renew_lock(self, path: str, body: dict) -> Reply:
        expirations = self.ns.renew_lock(path, _uuids(body["lock-tokens"]))
        return Reply(200, "OK", {"expirations": Array(UNDESCRIBED, Data.TIMESTAMP, *map(_ms, expirations))})

    def peek(self, path: str, body: dict) -> Reply:
        start, count = int(body.get("from-sequence-number", 1)), int(body.get("message-count", 1))
        found = self.ns.peek(path, start, count, session_id=_text(body.get("session-id")))
        if not found:
            return Reply(204, "No messages to peek.")
        return Reply(200, "OK", {"messages": [
            {"message": messages.encode_message(m, with_lock=False)} for m in found]})

    def schedule(self, path: str, body: dict) -> Reply:
        batch = [messages.decode_message(bytes(entry["message"])) for entry in _array(body["messages"])]
        numbers = self.ns.schedule(path, batch)
        return Reply(200, "OK", {"sequence-numbers": Array(UNDESCRIBED, Data.LONG, *numbers)})

    def cancel_scheduled(self, path: str, body: dict) -> Reply:
        self.ns.cancel_scheduled(path, [int(n) for n in _array(body["sequence-numbers"])])
        return Reply(200, "OK", {})

    def receive_by_sequence_number(self, path: str, body: dict) -> Reply:
        mode = ReceiveMode(int(body.get("receiver-settle-mode", ReceiveMode.PEEK_LOCK)))
        found = self.ns.receive_deferred(path, [int(n) for n in _array(body["sequence-numbers"])], mode,
                                         session_id=_text(body.get("session-id")))
        entries = []
        for m in found:
            encoded = messages.encode_message(m, with_lock=True, lock_token_annotation=True)
            entry: dict[str, Any] = {"message": encoded}
            if m.lock_token is not None:
                entry["lock-token"] = m.lock_token
            entries.append(entry)
        return Reply(200, "OK", {"messages": entries})

    def update_disposition(self, path: str, body: dict) -> Reply:
        status = str(body["disposition-status"])
        tokens = _uuids(body["lock-tokens"])
        session_id = _text(body.get("session-id"))
        changes = _modifications(body)
        if status == "completed":
            self.ns.complete(path, tokens, session_id=session_id)
        elif status == "abandoned":
            self.ns.abandon(path, tokens, changes, session_id=session_id)
        elif status == "defered":  # sic: the SDK's spelling
            self.ns.defer(path, tokens, changes, session_id=session_id)
        elif status == "suspended":
            self.ns.dead_letter(path, tokens, _text(body.get("deadletter-reason")),
                                _text(body.get("deadletter-description")), changes, session_id=session_id)
        else:
            raise ArgumentError(f"Unknown disposition-status '{status}'.")
        return Reply(200, "OK", {})

    def renew_session_lock(self, path: str, body: dict) -> Reply:
        until = self.ns.renew_session_lock(path, str(body["session-id"]))
        return Reply(200, "OK", {"expiration": _ms(until)})

    def get_session_state(self, path: str, body: dict) -> Reply:
        state = self.ns.get_session_state(path, str(body["session-id"]))
        return Reply(200, "OK", {"session-state": state})

    def set_session_state(self, path: str, body: dict) -> Reply:
        state = body.get("session-state")
        # an empty state clears it, as Service Bus does (the Go SDK clears with an empty binary)
        self.ns.set_session_state(path, str(body["session-id"]), bytes(state) if state else None)
        return Reply(200, "OK", {})

    def get_message_sessions(self, path: str, body: dict) -> Reply:
        skip, top = int(body.get("skip", 0)), int(body.get("top", 100))
        ids = self.ns.list_sessions(path, skip=skip, top=top)
        if not ids:
            return Reply(204, "No sessions.")
        sessions = Array(UNDESCRIBED, Data.STRING, *ids)
        return Reply(200, "OK", {"skip": int32(skip + len(ids)), "sessions-ids": sessions})


    def batch_delete(self, path: str, body: dict) -> Reply:
        """The JS SDK's deleteMessages/purgeMessages, .NET's DeleteMessagesAsync/PurgeMessagesAsync."""
        before = body.get("enqueued-time-utc")
        deleted = self.ns.delete_messages(
            path, int(body["message-count"]), None if before is None else _epoch(before),
            session_id=_text(body.get("session-id")))
        return Reply(200, "OK", {"message-count": int32(deleted)})

    # --- rules of a subscription: the SDKs' rule managers, which need only Listen ------------------------

    def add_rule(self, path: str, body: dict) -> Reply:
        self.ns.create_rule(*_subscription_of(path), rules.rule_of_request(body))
        return Reply(200, "OK", {})

    def enumerate_rules(self, path: str, body: dict) -> Reply:
        skip, top = int(body.get("skip", 0)), int(body.get("top", 100))
        found = self.ns.list_rules(*_subscription_of(path), skip=skip, top=top)
        if not found:
            return Reply(204, "No rules found", condition="com.microsoft:rules-not-found")
        return Reply(200, "OK", {"rules": [{"rule-description": rules.described_rule(r)} for r in found]})

    def remove_rule(self, path: str, body: dict) -> Reply:
        self.ns.delete_rule(*_subscription_of(path), str(body["rule-name"]))
        return Reply(200, "OK", {})


def _subscription_of(path: str) -> tuple[str, str]:
    """`t/Subscriptions/s` -> ("t", "s"); rules belong to subscriptions only."""
    parts = path.split("/")
    if len(parts) != 3 or parts[1].lower() != "subscriptions":
        raise NotAllowedError(f"Rules can be managed on a subscription only, not on '{path}'.")
    return parts[0], parts[2]


def unauthorized(right: str, path: str) -> UnauthorizedError:
    return UnauthorizedError(f"Unauthorized access. '{right}' claim(s) are required to perform this "
                             f"operation. Resource: '{path}'.")
