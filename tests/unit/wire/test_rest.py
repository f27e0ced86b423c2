"""The REST door's pieces on their own: routes, the HTTP form of a message, and parked head requests on a
real engine with a fake clock (the reactor's turn is played by hand: take, send, `before_commit`, commit)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from local_broker.engine import ArgumentError, Namespace, QueueProperties, ReceiveMode
from local_broker.engine.clock import FakeClock
from local_broker.wire.rest import properties
from local_broker.wire.rest.api import Route, route
from local_broker.wire.rest.heads import HeadRequests, Parked
from tests.unit.engine.helpers import msg

TOKEN = uuid.UUID("7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547")


# --- routes ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path", "expected"), [
    ("POST", "q/messages", Route("send", "q")),
    ("POST", "a/b/messages", Route("send", "a/b")),
    ("POST", "q/messages/head", Route("peek_lock", "q")),
    ("DELETE", "t/subscriptions/s/messages/head", Route("receive_and_delete", "t/subscriptions/s")),
    ("PUT", f"q/messages/m-1/{TOKEN}", Route("unlock", "q", "m-1", TOKEN)),
    ("DELETE", f"q/messages/17/{TOKEN}", Route("complete", "q", "17", TOKEN)),
    ("POST", f"q/Messages/17/{TOKEN}", Route("renew", "q", "17", TOKEN)),
    ("PUT", "q/messages", None),  # the management API's: an entity named q/messages
    ("DELETE", "q/messages/a/not-a-token", None),
    ("GET", "q/messages/head", None),
    ("POST", "messages", None),
])
def test_routes(method, path, expected) -> None:
    assert route(method, path.split("/")) == expected


# --- the HTTP form of a message -------------------------------------------------------------------------

@pytest.mark.parametrize(("header", "value"), [
    ('"High"', "High"), ("High", "High"), ('"say \\"hi\\""', 'say "hi"'), ("42", 42), ("-3", -3),
    ("2.5", 2.5), ("true", True), ("false", False), ('"12345,ABC"', "12345,ABC"),
    ('"Sun, 06 Nov 1994 08:49:37 GMT"', datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC)),
    ('"not a date GMT"', "not a date GMT"), ("1e3", 1000.0), (".5", 0.5), ("nan", "nan"), ("1_000", "1_000"),
    ("Infinity", "Infinity"), ("99999999999999999999", 1e20),  # past a long: a double
])
def test_custom_property_values_read_by_their_quoting(header, value) -> None:
    assert properties.read_custom(header) == value


@pytest.mark.parametrize(("value", "header"), [
    ("High", '"High"'), ('say "hi"', '"say \\"hi\\""'), ("é", '"\\u00e9"'), (42, "42"), (2.5, "2.5"),
    (True, "true"), (datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC), '"Sun, 06 Nov 1994 08:49:37 GMT"'),
    (TOKEN, f'"{TOKEN}"'),
])
def test_custom_property_values_written_so_they_read_back(value, header) -> None:
    assert properties.write_custom(value) == header
    assert properties.read_custom(header) == (str(value) if isinstance(value, uuid.UUID) else value)


def test_http_headers_are_not_custom_properties() -> None:
    headers = {"Authorization": "x", "Content-Type": "text/plain", "Host": "h", "User-Agent": "curl",
               "BrokerProperties": "{}", "x-ms-retrypolicy": "NoRetry", "Priority": "High", "n": "1"}
    assert properties.custom_properties(headers) == {"Priority": "High", "n": 1}


def test_broker_properties_set_the_message_fields() -> None:
    sent = {"MessageId": "m", "CorrelationId": "c", "SessionId": "s", "ReplyToSessionId": "rs", "Label": "l",
            "To": "t", "ReplyTo": "r", "PartitionKey": "s", "TimeToLive": 90,
            "ScheduledEnqueueTimeUtc": "Sun, 06 Nov 1994 08:49:37 GMT", "ForcePersistence": True}
    m = properties.message_from(b"body", sent, {"k": "v"}, "text/plain")
    assert (m.message_id, m.correlation_id, m.session_id, m.reply_to_session_id, m.subject, m.to, m.reply_to,
            m.partition_key, m.time_to_live, m.content_type) == (
        "m", "c", "s", "rs", "l", "t", "r", "s", 90.0, "text/plain")
    assert m.scheduled_enqueue_time == datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC).timestamp()
    assert m.application_properties == {"k": "v"}
    assert properties.payload_of(m.body) == b"body"


@pytest.mark.parametrize("bad", [{"TimeToLive": "soon"}, {"TimeToLive": -1}, {"MessageId": ["x"]},
                                 {"ScheduledEnqueueTimeUtc": "tomorrow"}])
def test_wrongly_typed_broker_properties_are_argument_errors(bad) -> None:
    with pytest.raises(ArgumentError):
        properties.message_from(b"", bad, {}, None)


@pytest.mark.parametrize("body", [b"{", b"{}", b"[]", b'[{"Body": 1}]', b'[{"UserProperties": {"a": [1]}}]',
                                  b'[{"BrokerProperties": []}]',
                                  b'[{"UserProperties": {"a": 99999999999999999999}}]'])
def test_bad_batches_are_argument_errors(body) -> None:
    with pytest.raises(ArgumentError):
        properties.batch_from(body)


def test_received_message_headers() -> None:
    m = msg(b"x", message_id="m-1", subject="M1", application_properties={"Priority": "High", "bad name": 1,
                                                                           "Content-Length": 9})
    m.sequence_number = m.enqueued_sequence_number = 7
    m.enqueued_time, m.lock_token, m.locked_until = 1_000_000.0, TOKEN, 1_000_060.0
    m.delivery_count = 1
    headers = properties.response_headers(m, "http://h/q/messages")
    props = json.loads(headers.pop("BrokerProperties"))
    assert props == {"DeliveryCount": 2, "EnqueuedSequenceNumber": 7, "SequenceNumber": 7, "State": "Active",
                     "EnqueuedTimeUtc": "Mon, 12 Jan 1970 13:46:40 GMT",
                     "TimeToLive": properties.MAX_TIME_TO_LIVE, "MessageId": "m-1", "Label": "M1",
                     "LockToken": str(TOKEN), "LockedUntilUtc": "Mon, 12 Jan 1970 13:47:40 GMT"}
    assert headers == {"Priority": '"High"', "Location": f"http://h/q/messages/m-1/{TOKEN}"}
    assert "LockToken" not in json.loads(properties.response_headers(m, None)["BrokerProperties"])


# --- parked head requests -------------------------------------------------------------------------------

class Timer:
    def __init__(self, delay: float, action) -> None:
        self.delay, self.action, self.cancelled = delay, action, False

    def cancel(self) -> None:
        self.cancelled = True


class Turns:
    """The reactor's part, played by hand: timers are kept, not run; after-commit work runs on `end_turn`."""

    def __init__(self) -> None:
        self.participants: list = []
        self.after_commit: list = []
        self.timers: list[Timer] = []
        self.turn = type("Turn", (), {"rearm": False})()
        self.loop = self

    def schedule(self, delay: float, action) -> Timer:
        self.timers.append(Timer(delay, action))
        return self.timers[-1]

    def end_turn(self, ns: Namespace) -> None:
        for participant in self.participants:
            participant.before_commit()
        ns.commit()
        done, self.after_commit = self.after_commit, []
        for fn in done:
            fn()


@pytest.fixture
def parked_world():
    ns = Namespace(clock=FakeClock(1_000_000.0))
    ns.create_queue(QueueProperties(name="q", lock_duration=timedelta(seconds=30), max_delivery_count=2))
    turns = Turns()
    endpoint = type("Endpoint", (), {"failure": None})()
    return ns, turns, endpoint, HeadRequests(ns, turns, endpoint)


def _park(heads: HeadRequests, outcomes: list, mode=ReceiveMode.PEEK_LOCK, open_=lambda: True):
    assert heads.take("Q", mode, 30, outcomes.append, Parked(open_)) is None  # paths are case-insensitive


def test_waiters_take_arriving_messages_in_arrival_order(parked_world) -> None:
    ns, turns, _, heads = parked_world
    first, second = [], []
    _park(heads, first)
    _park(heads, second, ReceiveMode.RECEIVE_AND_DELETE)
    assert heads.parked == 2 and [timer.delay for timer in turns.timers] == [30, 30]
    ns.send("q", [msg(message_id="a"), msg(message_id="b")])
    turns.end_turn(ns)
    assert [m.message_id for m in first + second] == ["a", "b"] and heads.parked == 0
    assert first[0].lock_token is not None and turns.turn.rearm
    ns.complete("q", [first[0].lock_token])
    assert ns.receive("q", 10) == []  # b was received and deleted
    assert all(timer.cancelled for timer in turns.timers)  # answered: their timeouts are off the loop
    for timer in turns.timers:
        timer.action()  # and one that fires anyway finds its waiter done
    assert first[1:] == second[1:] == []


def test_a_waiter_gets_nothing_at_its_timeout_and_takes_nothing_after(parked_world) -> None:
    ns, turns, _, heads = parked_world
    outcomes = []
    _park(heads, outcomes)
    [timer] = turns.timers
    timer.action()
    assert outcomes == [None] and heads.parked == 0
    ns.send("q", msg(message_id="late"))
    turns.end_turn(ns)
    assert outcomes == [None] and [m.message_id for m in ns.receive("q", 1)] == ["late"]


def test_a_message_unlocked_by_lock_expiry_reaches_a_waiter_with_its_delivery_count(parked_world) -> None:
    ns, turns, _, heads = parked_world
    ns.send("q", msg(message_id="m"))
    assert heads.take("q", ReceiveMode.PEEK_LOCK, 30, pytest.fail, Parked(lambda: True)).message_id == "m"
    outcomes = []
    _park(heads, outcomes)
    ns.clock.advance(31)
    ns.tick()
    turns.end_turn(ns)
    assert [(o.message_id, o.delivery_count) for o in outcomes] == [("m", 1)]


def test_a_waiter_whose_client_left_is_passed_over(parked_world) -> None:
    ns, turns, _, heads = parked_world
    gone, waiting = [], []
    _park(heads, gone, ReceiveMode.RECEIVE_AND_DELETE, open_=lambda: False)
    _park(heads, waiting)
    ns.send("q", msg(message_id="m"))
    turns.end_turn(ns)
    assert gone == [None] and [m.message_id for m in waiting] == ["m"]


def test_a_failed_commit_answers_with_its_error(parked_world) -> None:
    ns, turns, endpoint, heads = parked_world
    outcomes = []
    _park(heads, outcomes)
    ns.send("q", msg())
    endpoint.failure = failure = ArgumentError("the store failed")
    turns.end_turn(ns)
    assert outcomes == [failure]


def test_answer_all_ends_every_parked_request(parked_world) -> None:
    _, _, _, heads = parked_world
    outcomes = []
    _park(heads, outcomes)
    _park(heads, outcomes)
    down = ArgumentError("down")
    heads.answer_all(down)
    assert outcomes == [down, down] and heads.parked == 0
