"""The failover state machines with plain fake senders/receivers and a fake clock (no broker here: the
real-broker runs are the outage drills)."""

import datetime as dt
from dataclasses import dataclass, field

import pytest
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageSizeExceededError,
    ServiceBusConnectionError,
)

from patterns.failover import (
    ConsumerOptions,
    DuplicateDelivery,
    FailoverConsumer,
    FailoverPolicy,
    FailoverProducer,
    NamespacesUnavailableError,
)
from patterns.regions import PRIMARY, SECONDARY, Region

T0 = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


class FakeClock:
    def __init__(self):
        self.current = T0
        self.slept = 0.0

    def now(self):
        return self.current

    def sleep(self, seconds):
        self.slept += seconds
        self.advance(seconds)

    def advance(self, seconds):
        self.current += dt.timedelta(seconds=seconds)


class ListSink:
    def __init__(self):
        self.records = []

    def write(self, records):
        self.records.extend(records)

    def close(self):
        pass


@dataclass
class Message:
    message_id: str | None
    enqueued_time_utc: dt.datetime = T0
    application_properties: dict = field(default_factory=dict)
    sequence_number: int | None = None


class Namespace:
    """A namespace's entity as the clients see it: it can be down, it keeps what was sent."""

    def __init__(self, name):
        self.name = name
        self.down = False
        self.messages: list[Message] = []
        self.locked: list[Message] = []
        self.connects = 0
        self.lose_locks = False

    def region(self):
        def connect():
            self.connects += 1
            return Link(self)
        return Region(self.name, connect)

    def check(self):
        if self.down:
            raise ServiceBusConnectionError(message=f"{self.name} is down")


class Link:
    def __init__(self, ns):
        self.ns = ns

    def send_messages(self, message):
        self.ns.check()
        if message.message_id == "too-big":
            raise MessageSizeExceededError(message="too big")
        self.ns.messages.append(message)

    def receive_messages(self, max_message_count=1, max_wait_time=None):
        self.ns.check()
        batch = self.ns.messages[:max_message_count]
        del self.ns.messages[:max_message_count]
        self.ns.locked += batch
        return batch

    def peek_messages(self, max_message_count=1):
        self.ns.check()
        return self.ns.messages[:max_message_count]

    def complete_message(self, message):
        self.ns.check()
        self.ns.locked.remove(message)
        if self.ns.lose_locks:
            self.ns.messages.append(message)
            raise MessageLockLostError(message="lock lost")

    def abandon_message(self, message):
        self.ns.locked.remove(message)
        self.ns.messages.insert(0, message)

    def close(self):
        pass


@pytest.fixture
def world():
    clock = FakeClock()
    primary, secondary = Namespace(PRIMARY), Namespace(SECONDARY)
    return clock, primary, secondary


POLICY = FailoverPolicy(attempts=3, retry_delay=0.5, probe_interval=10)


def producer(world, sink=None):
    clock, primary, secondary = world
    return FailoverProducer(primary.region(), secondary.region(), entity="events", policy=POLICY, clock=clock,
                            audit=sink)


def test_producer_sends_to_the_primary_and_logs_it(world):
    _, primary, _ = world
    sink = ListSink()
    assert producer(world, sink).send(Message("m1")) == PRIMARY
    assert [m.message_id for m in primary.messages] == ["m1"]
    assert sink.records == [{"event": "sent", "namespace": "primary", "entity": "events", "message_id": "m1",
                             "enqueued_time_utc": "2026-11-22T12:00:00.000Z",
                             "observed_time_utc": "2026-11-22T12:00:00.000Z"}]


def test_producer_fails_over_after_the_configured_attempts_and_stays_until_the_probe(world):
    clock, primary, secondary = world
    client = producer(world)
    primary.down = True
    assert client.send(Message("m1")) == SECONDARY
    assert clock.slept == 1.0  # three attempts, two pauses
    assert primary.connects == 3  # the broken link is dropped and reopened for each attempt
    assert [e.kind for e in client.events] == ["failover"]
    primary.down = False
    clock.advance(5)
    assert client.send(Message("m2")) == SECONDARY  # the probe is not due yet
    clock.advance(5)
    assert client.send(Message("m3")) == PRIMARY  # probe: the primary took it
    assert [e.kind for e in client.events] == ["failover", "failback"]
    assert [m.message_id for m in secondary.messages] == ["m1", "m2"]
    assert [m.message_id for m in primary.messages] == ["m3"]


def test_a_failed_probe_costs_one_attempt_and_waits_for_the_next_interval(world):
    clock, primary, _ = world
    client = producer(world)
    primary.down = True
    client.send(Message("m1"))
    clock.advance(10)
    clock.slept = 0
    connects = primary.connects
    assert client.send(Message("m2")) == SECONDARY
    assert (primary.connects - connects, clock.slept) == (1, 0)
    assert client.send(Message("m3")) == SECONDARY
    assert primary.connects - connects == 1


def test_producer_gives_up_when_both_namespaces_fail_and_keeps_the_message_id(world):
    _, primary, secondary = world
    primary.down = secondary.down = True
    message = Message(None)
    with pytest.raises(NamespacesUnavailableError, match=r"primary: ServiceBusConnectionError.*secondary"):
        producer(world).send(message)
    assert message.message_id and len(message.message_id) == 32


def test_a_bad_message_is_not_an_outage(world):
    client = producer(world)
    with pytest.raises(MessageSizeExceededError):
        client.send(Message("too-big"))
    assert client.on_primary and client.events == []


# --- consumer -------------------------------------------------------------------------------------------

def at(seconds):
    return T0 + dt.timedelta(seconds=seconds)


def replica(message_id, origin_seconds, enqueued_seconds):
    origin = at(origin_seconds).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    properties = {b"repl-enqueued-time": origin.encode(), b"replication": 1}  # as the SDK hands them over
    return Message(message_id, at(enqueued_seconds), properties)


def consumer(world, handled, sink=None, **options):
    clock, primary, secondary = world
    return FailoverConsumer(primary.region(), secondary.region(), lambda m: handled.append(m.message_id),
                            entity="events", policy=POLICY, clock=clock, audit=sink,
                            options=ConsumerOptions(batch_size=10, **options))


def test_consumer_processes_the_primary_and_tracks_the_watermark(world):
    _, primary, _ = world
    handled, sink = [], ListSink()
    primary.messages = [Message("a", at(1), sequence_number=1), Message("b", at(2), sequence_number=2)]
    client = consumer(world, handled, sink, processor="west-1")
    assert client.poll() == 2
    assert handled == ["a", "b"] and primary.locked == [] and client.watermark == at(2)
    assert sink.records[1] == {"event": "processed", "namespace": "primary", "entity": "events",
                               "message_id": "b", "enqueued_time_utc": "2026-11-22T12:00:02.000Z",
                               "sequence_number": 2,
                               "observed_time_utc": "2026-11-22T12:00:00.000Z", "processor": "west-1"}


def test_consumer_fails_over_and_skips_what_it_processed_by_id_and_by_watermark(world):
    _, primary, secondary = world
    handled = []
    client = consumer(world, handled)
    primary.messages = [Message("a", at(1)), Message("b", at(20))]
    client.poll()  # watermark = 20 s
    client.processed.pop("a")  # forgotten id: only the watermark can recognise its replica
    primary.down = True
    for _ in range(3):
        client.poll()
    assert [e.kind for e in client.events] == ["failover"]
    secondary.messages = [
        replica("a", 1, 3),  # older than watermark - skew: skipped by watermark
        replica("b", 20, 22),  # known id
        replica("c", 17, 24),  # within the 5 s skew allowance: processed
        replica("d", 21, 25),  # newer than anything processed
        Message("e", at(2)),  # published on the secondary during the outage (secondary clock) ... old
        Message("f", at(40)),  # ... and new
    ]
    assert client.poll() == 3
    assert handled == ["a", "b", "c", "d", "f"]
    assert client.duplicates == [
        DuplicateDelivery("a", SECONDARY, None, "watermark", processed_again=False),
        DuplicateDelivery("b", SECONDARY, PRIMARY, "message-id", processed_again=False),
        DuplicateDelivery("e", SECONDARY, None, "watermark", processed_again=False),
    ]
    assert secondary.messages == secondary.locked == []  # skipped ones are completed too
    assert client.watermark == at(20)  # only the primary moves it


def test_failback_waits_for_publishers_then_drains_the_secondary_before_the_primary(world):
    clock, primary, secondary = world
    handled = []
    publishers_back = [False]
    client = consumer(world, handled, publishers_on_primary=lambda: publishers_back[0])
    primary.down = True
    for _ in range(3):
        client.poll()
    secondary.messages = [replica("r1", 1, 2), Message("s1", at(30))]
    client.poll()
    assert handled == ["r1", "s1"]
    # the primary recovers with its backlog: r1 (replicated and handled already) and p2
    primary.down = False
    primary.messages = [Message("r1", at(1)), Message("p2", at(5))]
    secondary.messages = [Message("s2", at(35))]
    clock.advance(10)
    client.poll()  # probe due, but the publishers are still on the secondary
    assert client.on_primary is False and client.draining is False and handled[-1] == "s2"
    publishers_back[0] = True
    secondary.messages = [Message("s3", at(36))]
    clock.advance(10)
    client.poll()  # probe succeeds: drain the secondary first
    assert client.draining and handled[-1] == "s3"
    client.poll()  # empty receive: drained
    assert client.on_primary
    assert [e.kind for e in client.events] == ["failover", "failback-started", "failback"]
    client.poll()
    assert handled == ["r1", "s1", "s2", "s3", "p2"]
    assert client.duplicates == [
        DuplicateDelivery("r1", PRIMARY, SECONDARY, "message-id", processed_again=False)]


def test_without_deduplication_duplicates_are_processed_again_and_reported(world):
    _, primary, _ = world
    handled = []
    primary.lose_locks = True  # the completion fails, so the message comes back
    primary.messages = [Message("a", at(1))]
    client = consumer(world, handled, deduplicate=False)
    client.poll()
    primary.lose_locks = False
    client.poll()
    assert handled == ["a", "a"]
    assert client.duplicates == [DuplicateDelivery("a", PRIMARY, PRIMARY, "message-id", processed_again=True)]


def test_a_handler_failure_abandons_the_message_and_it_is_processed_later(world):
    _, primary, _ = world
    calls = []

    def handler(message):
        calls.append(message.message_id)
        if len(calls) == 1:
            raise RuntimeError("transient application error")

    clock, _, secondary = world
    client = FailoverConsumer(primary.region(), secondary.region(), handler, entity="events", policy=POLICY,
                              clock=clock)
    primary.messages = [Message("a", at(1))]
    assert client.poll() == 0
    assert client.poll() == 1
    assert calls == ["a", "a"] and client.duplicates == [] and "a" in client.processed


def test_a_consumer_remembers_a_bounded_number_of_ids(world):
    _, primary, _ = world
    client = consumer(world, [], remember=2)
    primary.messages = [Message(m, at(i)) for i, m in enumerate("abc")]
    client.poll()
    assert list(client.processed) == ["b", "c"]


def test_a_failover_policy_must_make_sense():
    with pytest.raises(ValueError, match="attempts >= 1"):
        FailoverPolicy(attempts=0)


def test_a_drain_ends_at_a_replica_published_after_it_began_though_replication_never_lets_it_run_empty(world):
    clock, primary, secondary = world
    handled = []
    client = consumer(world, handled)
    primary.down = True
    for _ in range(3):
        client.poll()
    primary.down = False
    clock.advance(10)
    began = (clock.now() - T0).total_seconds()
    secondary.messages = [Message("s1", at(began - 1)), replica("old", began - 2, began - 1)]
    client.poll()  # probe: the drain begins, and takes what the secondary holds
    assert client.draining and handled == ["s1", "old"]
    # the replica's origin is later than the start of the drain plus the clock skew allowance
    secondary.messages = [Message("s2", at(began)), replica("new", began + 6, began + 6)]
    client.poll()
    assert handled == ["s1", "old", "s2", "new"] and client.on_primary
    assert [e.kind for e in client.events] == ["failover", "failback-started", "failback"]
