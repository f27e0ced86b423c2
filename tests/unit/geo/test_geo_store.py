"""Geo-replication in the store (local_broker/geo/store.py): what a promoted secondary serves, what each mode
acknowledges and throttles, and what a forced promotion loses. A fake monotonic clock moves the lag."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from local_broker.engine import (
    FakeClock,
    Message,
    Namespace,
    NamespaceConfig,
    QueueProperties,
    RuleProperties,
    ServerBusyError,
    SqlFilter,
    StoreWriteError,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.geo.store import GeoError, GeoStore, Replica
from local_broker.store import SqliteStore

VIEWS = ("q", "q/$DeadLetterQueue", "t/Subscriptions/a", "t/Subscriptions/b", "sq")


class Monotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _open(path: Path) -> SqliteStore:
    return SqliteStore(path, synchronous="OFF")


def geo_namespace(tmp_path: Path, synchronous: bool, max_lag: float = 10.0):
    replicas = []
    for region in ("west", "north"):
        (tmp_path / region).mkdir()
        path = tmp_path / region / "ns.db"
        replicas.append(Replica(region, path, _open(path)))
    monotonic = Monotonic()
    geo = GeoStore(replicas, "west", synchronous, max_lag, _open, clock=monotonic)
    ns = Namespace.open(geo, NamespaceConfig(name="orders"), FakeClock())
    return ns, geo, monotonic


def _promote(ns: Namespace, geo: GeoStore, region: str, forced: bool) -> dict:
    report = geo.promote(region, forced)
    ns.reopen()  # what the broker does on the reactor after a promotion
    return report


def _workload(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("q", requires_duplicate_detection=True,
                                    duplicate_detection_history_time_window=timedelta(minutes=10)))
    ns.create_queue(QueueProperties("sq", requires_session=True))
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("a"), RuleProperties("big", SqlFilter("n > 1")))
    ns.create_subscription("t", SubscriptionProperties("b"))
    ns.send("q", [Message(b"m%d" % i, {"n": i}, message_id=f"m{i}") for i in range(6)])
    done, deferred, dead, *_ = ns.receive("q", 3)
    ns.complete("q", [done.lock_token])
    ns.defer("q", [deferred.lock_token])
    ns.dead_letter("q", [dead.lock_token], "why", "because")
    ns.send("t", [Message(b"t%d" % i, {"n": i}, message_id=f"t{i}") for i in range(3)])
    ns.send("sq", Message(b"z", session_id="A"))
    ns.set_session_state("sq", "A", b"state")
    ns.commit()


def _view(ns: Namespace) -> dict:
    return {p: [(m.message_id, m.sequence_number, m.delivery_count, m.state, m.body)
                for m in ns.peek(p, 0, 50)] for p in VIEWS}


@pytest.mark.parametrize("synchronous", [True, False])
def test_a_planned_promotion_serves_everything_the_primary_had(tmp_path, synchronous):
    ns, geo, _ = geo_namespace(tmp_path, synchronous)
    _workload(ns)
    before = _view(ns)
    report = _promote(ns, geo, "north", forced=False)
    assert report == {"primary": "north", "promotion": "planned", "lost_operations": 0,
                      "lost_message_ids": []}
    assert _view(ns) == before
    assert ns.get_rule("t", "a", "big").filter == SqlFilter("n > 1")
    assert ns.get_session_state("sq", "A") == b"state"
    assert ns.receive_deferred("q", [before["q"][0][1]])[0].message_id == "m1"
    ns.send("q", Message(b"again", message_id="m4"))  # duplicate-detection history came along
    ns.send("q", Message(b"new", message_id="fresh"))
    ns.commit()
    peeked = ns.peek("q", 0, 50)
    assert [m.message_id for m in peeked].count("m4") == 1
    assert peeked[-1].sequence_number > max(s for _, s, *_ in before["q"])  # numbering continues
    geo.pump()
    assert geo.status()["replicas"][0] == {"region": "west", "role": "Secondary", "state": "Ready",
                                           "lag_seconds": 0.0, "pending_operations": 0, "latency_ms": 0}
    _promote(ns, geo, "west", forced=False)  # and back: the old primary kept up as a secondary
    assert [m.message_id for m in ns.peek("q", 0, 50)] == [m.message_id for m in peeked]


def test_synchronous_acknowledges_only_what_the_secondary_holds(tmp_path):
    ns, geo, _ = geo_namespace(tmp_path, synchronous=True)
    _workload(ns)
    before = _view(ns)
    geo.set_region("west", available=False)  # the primary's region goes down: promote at once
    report = _promote(ns, geo, "north", forced=True)
    assert (report["lost_operations"], _view(ns)) == (0, before)


def test_synchronous_refuses_work_while_the_secondary_is_down(tmp_path):
    ns, geo, _ = geo_namespace(tmp_path, synchronous=True)
    ns.create_queue(QueueProperties("q"))
    ns.commit()
    geo.set_region("north", available=False)
    ns.send("q", Message(b"refused", message_id="r"))
    with pytest.raises(ServerBusyError, match="secondary region 'north' is unavailable"):
        ns.commit()
    assert ns.peek("q", 0, 10) == []  # nothing of it was written
    geo.set_region("north", available=True)
    ns.send("q", Message(b"ok", message_id="ok"))
    ns.commit()
    assert geo.status()["replicas"][1]["pending_operations"] == 0


def test_asynchronous_lags_throttles_and_a_forced_promotion_loses_the_unshipped(tmp_path):
    ns, geo, monotonic = geo_namespace(tmp_path, synchronous=False, max_lag=10.0)
    ns.create_queue(QueueProperties("q"))
    ns.send("q", [Message(b"a", message_id="shipped")])
    ns.commit()
    assert geo.pump() == 2  # the queue and the message
    ns.send("q", [Message(b"b", message_id="late-1"), Message(b"c", message_id="late-2")])
    ns.commit()
    monotonic.now += 4
    north = geo.status()["replicas"][1]
    assert (north["lag_seconds"], north["pending_operations"]) == (4.0, 1)
    monotonic.now += 7  # lag 11 s > 10 s: the primary throttles
    ns.send("q", Message(b"d", message_id="throttled"))
    with pytest.raises(ServerBusyError, match="maximum replication lag"):
        ns.commit()
    geo.set_region("west", available=False)
    assert geo.pump() == 0  # a region that is down ships nothing
    report = _promote(ns, geo, "north", forced=True)
    assert report == {"primary": "north", "promotion": "forced", "lost_operations": 1,
                      "lost_message_ids": ["late-1", "late-2"]}
    assert [m.message_id for m in ns.peek("q", 0, 10)] == ["shipped"]
    west = geo.status()["replicas"][0]
    assert (west["role"], west["state"]) == ("Secondary", "Unavailable")
    with pytest.raises(GeoError, match="region 'west' is unavailable"):
        geo.promote("west", forced=False)
    geo.set_region("west", available=True)  # back: seeded from the new primary, its lost tail discarded
    ns.send("q", Message(b"e", message_id="after"))
    ns.commit()
    geo.pump()
    _promote(ns, geo, "west", forced=False)
    assert [m.message_id for m in ns.peek("q", 0, 10)] == ["shipped", "after"]


def test_asynchronous_entries_keep_the_messages_as_committed(tmp_path):
    """A shipped entry holds the messages as they were at its commit, not as the engine changed them since
    (a lock taken, a topic message's content shared by more copies)."""
    ns, geo, _ = geo_namespace(tmp_path, synchronous=False)
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("a"))
    ns.create_subscription("t", SubscriptionProperties("b"))
    ns.create_queue(QueueProperties("q"))
    ns.send("t", Message(b"fan", message_id="fan"))
    ns.send("q", Message(b"one", message_id="one"))
    ns.commit()
    (locked,) = ns.receive("q", 1)
    ns.receive("t/Subscriptions/a", 1)
    ns.commit()
    ns.complete("q", [locked.lock_token])
    ns.commit()
    geo.pump()
    _promote(ns, geo, "north", forced=True)
    assert ns.peek("q", 0, 10) == []
    assert [m.body for m in ns.peek("t/Subscriptions/b", 0, 10)] == [b"fan"]
    assert ns.receive("t/Subscriptions/a", 1) == []  # still locked, as at the commit shipped


def test_promotion_refusals(tmp_path):
    _, geo, _ = geo_namespace(tmp_path, synchronous=False)
    with pytest.raises(GeoError, match="already the primary"):
        geo.promote("west", forced=False)
    with pytest.raises(GeoError, match="No replica in region 'south'"):
        geo.promote("south", forced=False)
    geo.set_region("west", available=False)
    with pytest.raises(GeoError, match="Use forced promotion"):
        geo.promote("north", forced=False)
    geo.set_region("north", available=False)
    with pytest.raises(GeoError, match="'north' is unavailable"):
        geo.promote("north", forced=True)


def test_a_secondary_that_fails_to_apply_is_seeded_again_before_the_next_write(tmp_path):
    ns, geo, _ = geo_namespace(tmp_path, synchronous=True)
    ns.create_queue(QueueProperties("q"))
    ns.commit()
    north = geo.replicas["north"]
    failing = north.store.write

    def broken(changes):
        north.store.write = failing  # once: a disk that recovers
        raise StoreWriteError("disk error")

    north.store.write = broken
    ns.send("q", Message(b"a", message_id="kept-by-the-primary"))
    with pytest.raises(ServerBusyError, match="could not apply"):
        ns.commit()
    assert geo.status()["replicas"][1]["state"] == "Seeding"
    ns.send("q", Message(b"b", message_id="after"))
    ns.commit()  # seeds north from the primary first, then replicates this one
    _promote(ns, geo, "north", forced=True)
    assert [m.message_id for m in ns.peek("q", 0, 10)] == ["kept-by-the-primary", "after"]
