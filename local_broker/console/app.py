"""Routes of the console (everything under `/$console`, and `/` which leads there).

The console is one more client of the namespace's engine: it goes through `run_on_engine` and the
control API like the wire endpoints do, and checks the rights of the session's policy before each action.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl

from local_broker.auth import LISTEN, MANAGE, SEND, NamespaceAuth
from local_broker.console import operations, pages
from local_broker.console.sessions import COOKIE, SESSION_SECONDS, Session, Sessions
from local_broker.control import ControlApi
from local_broker.engine import BrokerError, Message, UnauthorizedError
from local_broker.faults import NamespaceFaults

log = logging.getLogger("local_broker.console")
HTML = "text/html; charset=utf-8"
STATIC = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8",
          "favicon.svg": "image/svg+xml"}
PAGE_SIZE = 20


@dataclass
class ConsoleResponse:
    status: int
    body: bytes
    content_type: str = HTML
    headers: dict[str, str] = field(default_factory=dict)


def _redirect(location: str, cookie: str | None = None) -> ConsoleResponse:
    headers = {"Location": location}
    if cookie is not None:
        headers["Set-Cookie"] = cookie
    return ConsoleResponse(303, b"", HTML, headers)


class _Unconfirmed(Exception):
    """A destructive action posted without confirmed=1: its question is asked on a page first."""


def _ask_first(switch: str, target: str, form: dict[str, str]) -> None:
    question = pages.question(switch, target, form)
    if question and form.get("confirmed") != "1":
        raise _Unconfirmed(question)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Console:
    """The web console of one namespace, served on its management port."""

    def __init__(self, namespace_name: str, auth: NamespaceAuth, run_on_engine: Callable[..., Any],
                 faults: NamespaceFaults, control: ControlApi, health: Callable[[], list[str]],
                 clock: Callable[[], float] = time.time) -> None:
        self.namespace_name = namespace_name
        self.run_on_engine = run_on_engine
        self.faults = faults
        self.control = control
        self.health = health
        self.clock = clock
        self.amqp_address: tuple[str, int] | None = None  # set by the server once the listener is bound
        self.admin_address: tuple[str, int] | None = None  # (the management API's, the console's own)
        self.certificate = ""  # the path of the broker's HTTPS certificate, for the management API's clients
        # every namespace of the broker -> its console's address and its faults (status is no secret)
        self.namespaces: dict[str, tuple[str, NamespaceFaults]] = {}
        login_policy = next((p for p in auth.policies.values() if MANAGE in p.rights),
                            next(iter(auth.policies.values())))
        self.sessions = Sessions(auth, login_policy)
        self.cookie_name = f"{COOKIE}-{namespace_name}"  # browsers share cookies across a host's ports

    def login_url(self, base_url: str) -> str | None:
        """The one-time login link (None once it has been used)."""
        token = self.sessions.one_time_token()
        return None if token is None else f"{base_url}{pages.url('login', once=token)}"

    @staticmethod
    def serves(segments: list[str]) -> bool:
        """The console's paths, and the icon browsers ask every site for (needing no token, like /health)."""
        return not segments or segments[0] == pages.PREFIX[1:] or segments == ["favicon.ico"]

    def respond(self, method: str, segments: list[str], query: str, headers: dict[str, str],
                body: bytes, secure: bool) -> ConsoleResponse:
        """`segments`: the percent-decoded path; `headers` lower-cased; `secure`: the request came over
        HTTPS, so the session cookie is marked to go back over HTTPS only."""
        response = self._answer(method, segments, query, headers, body)
        if secure and "Set-Cookie" in response.headers:
            response.headers["Set-Cookie"] += "; Secure"
        return response

    def _answer(self, method: str, segments: list[str], query: str, headers: dict[str, str],
                body: bytes) -> ConsoleResponse:
        if not segments:
            return _redirect(pages.url())
        route = ["static", "favicon.svg"] if segments == ["favicon.ico"] else segments[1:]
        if route[:1] == ["static"] and len(route) == 2 and route[1] in STATIC:
            asset = resources.files("local_broker.console").joinpath("static", route[1]).read_bytes()
            return ConsoleResponse(200, asset, STATIC[route[1]], {"Cache-Control": "no-cache"})
        params = dict(parse_qsl(query))
        form = dict(parse_qsl(body.decode("utf-8", "replace"))) if method == "POST" else {}
        if route == ["login"]:
            return self._login(method, params, form)
        session = self.sessions.find(self._cookie(headers), self.clock())
        if session is None:
            return _redirect(pages.url("login"))
        try:
            if method == "POST":
                if not hmac.compare_digest(form.get("csrf", "").encode(), session.csrf.encode()):
                    raise _Refused(403, "The form is stale or came from another site; reload the page.")
                return self._act(route, params, form, session, headers)
            return self._page(route, params, session)
        except _Refused as exc:
            return self._error(exc.status, str(exc), session)
        except BrokerError as exc:
            return self._error(exc.http_status, exc.description, session)
        except Exception:
            log.exception("console request %s /%s failed", method, "/".join(segments))
            return self._error(500, "The broker failed to process the request (its log has the details).",
                               session)

    # --- sign in / out -------------------------------------------------------------------------------

    def _cookie(self, headers: dict[str, str]) -> str | None:
        jar = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:
            return None
        morsel = jar.get(self.cookie_name)
        return morsel.value if morsel else None

    def _set_cookie(self, value: str, max_age: int) -> str:
        return f"{self.cookie_name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}"

    def _login(self, method: str, params: dict[str, str], form: dict[str, str]) -> ConsoleResponse:
        try:
            if method == "POST":
                cookie, _ = self.sessions.login_with_key(form.get("policy", ""), form.get("key", ""),
                                                         self.clock())
            elif "once" in params:
                cookie, _ = self.sessions.login_once(params["once"], self.clock())
            else:
                return self._html(200, pages.login(self.namespace_name))
        except UnauthorizedError as exc:
            return self._html(401, pages.login(self.namespace_name, exc.description))
        return _redirect(pages.url(), self._set_cookie(cookie, SESSION_SECONDS))

    # --- pages ---------------------------------------------------------------------------------------

    def _page(self, route: list[str], params: dict[str, str], session: Session) -> ConsoleResponse:
        if route in ([], [""]):
            return self._namespace(session, params.get("note"))
        if len(route) >= 2 and route[0] == "fragments":
            return ConsoleResponse(200, self._fragment(route[1:]).encode(), HTML,
                                   {"Cache-Control": "no-store"})
        if len(route) >= 2 and route[0] == "entity":
            return self._entity("/".join(route[1:]), params, session)
        raise _Refused(404, f"No console page /{'/'.join(route)}.")

    def _fragment(self, route: list[str]) -> str:
        """A part of a page that console.js reloads every second."""
        if route == ["entities"]:
            at, rows = self.run_on_engine(operations.entities)
            return pages.entity_rows(rows, at)
        if route == ["status"]:
            return pages.status_panel(self.health(), self._fault_state())
        if route == ["namespaces"]:
            return pages.namespace_rows(self.namespace_name, self._hosted())
        if len(route) >= 2 and route[0] == "entity":
            at, row, _ = self._row("/".join(route[1:]))
            return pages.entity_counts(row, at)
        raise _Refused(404, f"No console fragment /{'/'.join(route)}.")

    def _hosted(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """Every namespace of the broker: its console's address and its fault state now."""
        return {name: (address, faults.state.to_json())
                for name, (address, faults) in self.namespaces.items()}

    def _namespace(self, session: Session, note: str | None) -> ConsoleResponse:
        at, rows = self.run_on_engine(operations.entities)
        content = pages.namespace_page(self.namespace_name, self.health(), self._fault_state(),
                                       self._connection_strings(session), self.certificate, rows, at,
                                       MANAGE in session.policy.rights, session.csrf)
        if self.control.geo is not None:
            content += pages.geo_panel(self.control.geo.status(), MANAGE in session.policy.rights,
                                       session.csrf)
        content += pages.namespaces(self.namespace_name, self._hosted())
        return self._html(200, pages.layout(self.namespace_name, "Namespace", content, note,
                                            session.policy.name, session.csrf))

    def _entity(self, path: str, params: dict[str, str], session: Session) -> ConsoleResponse:
        sub_queue = params.get("queue", "main")
        if sub_queue not in pages.SUB_QUEUES:
            raise _Refused(400, f"Unknown sub-queue '{sub_queue}'; use main, dlq or tdlq.")
        start = params.get("start", "0")
        if not start.isdigit():
            raise _Refused(400, f"'start' must be a sequence number, not '{start}'.")
        at, row, rows = self._row(path)
        messages: list[operations.PeekedMessage] = []
        if LISTEN in session.policy.rights and row.receivable:
            suffix = pages.SUB_QUEUES[sub_queue][0]
            messages = self.run_on_engine(
                lambda ns: operations.peek(ns, row.path + suffix, int(start), PAGE_SIZE))
        down = {p["partition_id"] for p in self._fault_state()["partitions_down"]
                if p["entity"].lower() == row.path.lower()}
        subscriptions = [r for r in rows if r.kind == "subscription"
                         and r.path.lower().startswith(row.path.lower() + "/subscriptions/")]
        content = pages.entity_page(row, at, sub_queue, messages, int(start), PAGE_SIZE,
                                    session.policy.rights, session.csrf, down, subscriptions)
        return self._html(200, pages.layout(self.namespace_name, row.path, content, params.get("note"),
                                            session.policy.name, session.csrf, pages.entity_badges(row)))

    def _row(self, path: str) -> tuple[float, operations.EntityRow, list[operations.EntityRow]]:
        """When, the entity's row, and every row (as operations.entities reads them)."""
        at, rows = self.run_on_engine(operations.entities)
        row = next((r for r in rows if r.path.lower() == path.lower()), None)
        if row is None:
            raise _Refused(404, f"No queue, topic or subscription '{path}' in namespace "
                                f"'{self.namespace_name}'.")
        return at, row, rows

    def _fault_state(self) -> dict[str, Any]:
        return self.control.handle("GET", ["faults"], b"").body

    def _connection_strings(self, session: Session) -> dict[str, str]:
        """Built with the session's own policy: a Listen key does not see the Manage key."""
        credentials = f"SharedAccessKeyName={session.policy.name};SharedAccessKey={session.policy.key}"
        endpoints = (("AMQP (ServiceBusClient)", self.amqp_address),
                     ("Management API (ServiceBusAdministrationClient)", self.admin_address))
        return {label: f"Endpoint=sb://{address[0]}:{address[1]};{credentials};UseDevelopmentEmulator=true"
                for label, address in endpoints if address is not None}

    # --- actions -------------------------------------------------------------------------------------

    def _act(self, route: list[str], params: dict[str, str], form: dict[str, str], session: Session,
             headers: dict[str, str]) -> ConsoleResponse:
        try:
            return self._carry_out(route, params, form, session, headers)
        except _Unconfirmed as asked:
            return self._confirm(str(asked), route, params, form, session)

    def _carry_out(self, route: list[str], params: dict[str, str], form: dict[str, str], session: Session,
                   headers: dict[str, str]) -> ConsoleResponse:
        if route == ["logout"]:
            self.sessions.close(self._cookie(headers))
            return _redirect(pages.url("login"), self._set_cookie("", 0))
        if route == ["faults"]:
            return self._set_faults(form, session)
        if route == ["geo", "promote"]:
            return self._promote(form, session)
        if len(route) >= 3 and route[0] == "entity" and route[-1] in ("actions", "partitions", "status"):
            path = "/".join(route[1:-1])
            if route[-1] == "partitions":
                return self._set_partition(path, form, session)
            if route[-1] == "status":
                return self._set_status(path, form, session)
            return self._entity_action(path, params.get("queue", "main"), form, session)
        raise _Refused(404, f"No console action /{'/'.join(route)}.")

    def _set_faults(self, form: dict[str, str], session: Session) -> ConsoleResponse:
        session.require(MANAGE)
        _ask_first("faults", "", form)
        change: dict[str, Any] = {}
        if "namespace_down" in form:
            change["namespace_down"] = None if form["namespace_down"] == "up" else form["namespace_down"]
        if "latency_ms" in form:
            if not form["latency_ms"].isdigit():
                raise _Refused(400, "Latency must be a whole number of milliseconds, not "
                                    f"'{form['latency_ms']}'.")
            change["latency_ms"] = int(form["latency_ms"])
        answer = self._control(["faults"], change)
        return _redirect(pages.url(note=pages.describe_faults(answer)))

    def _set_partition(self, path: str, form: dict[str, str], session: Session) -> ConsoleResponse:
        session.require(MANAGE)
        _ask_first("partitions", path, form)
        partition, _, state = form.get("partition", "").partition(":")
        self._control(["partitions", path, partition], {"available": state == "up"})
        return _redirect(pages.url("entity", path, note=f"Partition {partition} {state}."))

    def _set_status(self, path: str, form: dict[str, str], session: Session) -> ConsoleResponse:
        session.require(MANAGE)
        _ask_first("status", path, form)
        answer = self._control(["status", path], {"status": form.get("status", "")})
        return _redirect(pages.url("entity", path, note=f"Status of {path}: {answer['status']}."))

    def _promote(self, form: dict[str, str], session: Session) -> ConsoleResponse:
        session.require(MANAGE)
        region = form.get("region", "")
        _ask_first("geo", region, form)
        answer = self._control(["geo", "promote"], {"region": region, "mode": form.get("mode", "planned")},
                               "POST")
        return _redirect(pages.url(note=pages.describe_promotion(answer)))

    def _control(self, segments: list[str], change: dict[str, Any], method: str = "PUT") -> dict[str, Any]:
        """A change through the control API's code (as `sbfed broker fault` makes it); its answer."""
        answer = self.control.handle(method, segments, json.dumps(change).encode())
        if answer.status != 200:
            raise _Refused(answer.status, answer.body["error"]["message"])
        return answer.body

    def _entity_action(self, path: str, sub_queue: str, form: dict[str, str],
                       session: Session) -> ConsoleResponse:
        if sub_queue not in pages.SUB_QUEUES:
            raise _Refused(400, f"Unknown sub-queue '{sub_queue}'; use main, dlq or tdlq.")
        target = path + pages.SUB_QUEUES[sub_queue][0]
        action = form.get("action")
        if action == "purge":
            session.require(MANAGE)
            _ask_first("actions", target, form)
            removed = self.run_on_engine(lambda ns: operations.purge(ns, target))
            note = f"Purged {removed} message(s) from {target}."
        elif action == "resubmit":
            session.require(LISTEN)
            session.require(SEND)
            _ask_first("actions", target, form)
            number = form.get("sequence_number")
            if number is not None and not number.isdigit():
                raise _Refused(400, f"'{number}' is not a sequence number.")
            wanted = None if number is None else {int(number)}
            count = self.run_on_engine(lambda ns: operations.resubmit(ns, target, wanted))
            note = f"Resubmitted {count} message(s) from {target}."
        elif action == "send":
            session.require(SEND)
            message = _test_message(form, self.clock())
            self.run_on_engine(lambda ns: operations.send(ns, path, message))
            note = f"Sent a message to {path}."
        else:
            raise _Refused(400, f"Unknown action '{action}'; use purge, resubmit or send.")
        return _redirect(pages.url("entity", path, queue=sub_queue, note=note))

    def _confirm(self, question: str, route: list[str], params: dict[str, str], form: dict[str, str],
                 session: Session) -> ConsoleResponse:
        """A destructive action posted without confirmed=1 (no script ran to ask): ask on a page."""
        action = pages.url(*route, **params)
        back = pages.url("entity", "/".join(route[1:-1])) if route[0] == "entity" else pages.url()
        content = pages.confirmation_page(question, action, form, back)
        return self._html(200, pages.layout(self.namespace_name, "Confirm", content, None,
                                            session.policy.name, session.csrf))

    # --- answers -------------------------------------------------------------------------------------

    def _html(self, status: int, page: str) -> ConsoleResponse:
        return ConsoleResponse(status, page.encode(), HTML, {"Cache-Control": "no-store"})

    def _error(self, status: int, message: str, session: Session) -> ConsoleResponse:
        content = (f'<p class="error" id="error">{pages.escape(message)}</p>'
                   f'<p><a href="{pages.url()}">back</a></p>')
        return self._html(status, pages.layout(self.namespace_name, f"Error {status}", content, None,
                                               session.policy.name, session.csrf))


def _test_message(form: dict[str, str], now: float) -> Message:
    properties: dict[str, Any] = {}
    if form.get("properties", "").strip():
        try:
            properties = json.loads(form["properties"])
        except ValueError as exc:
            raise _Refused(400, f"Application properties must be a JSON object: {exc}.") from exc
        if not isinstance(properties, dict):
            raise _Refused(400, "Application properties must be a JSON object.")
    delay = form.get("schedule_seconds", "").strip()
    if delay and not delay.isdigit():
        raise _Refused(400, f"Schedule must be a whole number of seconds, not '{delay}'.")
    return Message(operations.data_body(form.get("body", "").encode()), properties,
                   message_id=form.get("message_id") or None, session_id=form.get("session_id") or None,
                   partition_key=form.get("partition_key") or None,
                   scheduled_enqueue_time=now + int(delay) if delay and int(delay) else None)

