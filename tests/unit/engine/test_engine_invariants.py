"""Random operation streams: nothing lost or duplicated, counts and sizes agree, restarts change nothing."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest

from local_broker.engine import (
    BrokerError,
    FakeClock,
    Namespace,
    QueueProperties,
    ReceiveMode,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.store import SqliteStore

from .helpers import msg

PATHS = [
    "q",
    "q/$DeadLetterQueue",
    "t/Subscriptions/a",
    "t/Subscriptions/b",
    "t/Subscriptions/a/$DeadLetterQueue",
]


def build(ns: Namespace) -> None:
    ns.create_queue(
        QueueProperties(
            "q",
            lock_duration=timedelta(seconds=10),
            max_delivery_count=3,
            default_message_time_to_live=timedelta(seconds=200),
            dead_lettering_on_message_expiration=True,
        )
    )
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription(
        "t", SubscriptionProperties("a", lock_duration=timedelta(seconds=10), max_delivery_count=2)
    )
    ns.create_subscription("t", SubscriptionProperties("b", lock_duration=timedelta(seconds=10)))


def snapshot(ns: Namespace) -> dict[str, list[tuple]]:
    return {
        p: sorted(
            (m.message_id, m.sequence_number, m.delivery_count, int(m.state), m.lock_token is not None)
            for m in ns.peek(p, 0, 100_000)
        )
        for p in PATHS
    }


def check_bookkeeping_of(entity, ns: Namespace | None = None) -> None:
    for sq in entity.sub_queues():
        everything = sorted(sq.messages.values(), key=lambda m: (m.sequence_number, m.uid))
        browsed = sq.browse.peek(0, 10**9, None)
        assert sorted(browsed, key=lambda m: (m.sequence_number, m.uid)) == everything  # the peek index
        assert [m.sequence_number for m in browsed] == [m.sequence_number for m in everything]
        if everything:
            middle = everything[len(everything) // 2].sequence_number
            assert sq.browse.peek(middle, 3, None)[0].sequence_number == middle
        states = sum(len(s.state) for s in sq.sessions.values() if s.state) if sq.sessions else 0
        lazy = [m.sequence_number for m in sq.lazy]
        assert lazy == sorted(lazy) and all(m.entity is None for m in sq.lazy)
        assert not (lazy and everything) or everything[-1].sequence_number < lazy[0]  # lazy copies are newest
        tail = sq.tail  # messages left in the store (paging.py)
        paged = 0 if tail is None else tail.size
        assert sq.size == (
            sum(m.size for m in sq.messages.values()) + sum(m.size for m in sq.lazy) + states + paged
        )
        if tail is not None and ns is not None:  # the tail: what the store holds after `after`, and pending
            journal = ns._journal  # rows in memory, or changed or deleted since the last commit, are not
            stored = [
                m
                for m in ns._store.page(
                    sq.entity.key, 0, tail.after, None, sq.lazy[0].sequence_number if sq.lazy else 1e30
                )
                if m.uid not in sq.messages and m.uid not in journal.full and m.uid not in journal.deleted
            ]
            assert all(m.entity is sq for m in tail.pending)
            assert tail.count == len(stored) + len(tail.pending)
            assert tail.size == sum(m.size for m in [*stored, *tail.pending])
        assert all(m.entity is sq for m in sq.messages.values())
        assert all(sq.locked[m.lock_token.int] is m for m in sq.messages.values() if m.lock_token is not None)
        assert len(sq.locked) == sum(1 for m in sq.messages.values() if m.lock_token is not None)


def check_bookkeeping(ns: Namespace) -> None:
    for entity in [ns._queues["q"], *ns._topics["t"].subscriptions.values()]:
        check_bookkeeping_of(entity, ns if ns._store.pages else None)
    check_totals(ns)


def check_totals(ns: Namespace) -> None:
    """The quota totals of queues, topics and the namespace are the bytes of their sub-queues (and
    subscriptions)."""
    for queue in ns._queues.values():
        assert queue.size == sum(sq.size for sq in queue.sub_queues())
    for topic in ns._topics.values():
        subs = [sq for s in topic.subscriptions.values() for sq in s.sub_queues()]
        assert topic.size == topic.held.size + sum(sq.size for sq in subs)
    # the namespace quota's running total is what they hold together
    entities = [*ns._queues.values(), *ns._topics.values()]
    assert ns._usage.size == sum(entity.size for entity in entities)


def drive(
    ns: Namespace, clock: FakeClock, rng: random.Random, steps: int, prefix: str = ""
) -> tuple[set[str], set[str]]:
    """Run random operations; returns (ids sent to q, ids completed or received-and-deleted from q)."""
    sent: set[str] = set()
    gone: set[str] = set()
    held: dict[str, list] = {p: [] for p in PATHS}
    counter = 0
    for _ in range(steps):
        op = rng.random()
        path = rng.choice(PATHS)
        try:
            if op < 0.25:
                batch = [
                    msg(message_id=f"{prefix}m{counter + i}", time_to_live=rng.choice([None, 50, 500]))
                    for i in range(3)
                ]
                counter += 3
                if rng.random() < 0.5:
                    ns.send("q", batch)
                    sent.update(m.message_id for m in batch)
                else:
                    ns.send("t", batch)
            elif op < 0.45:
                mode = ReceiveMode.PEEK_LOCK if rng.random() < 0.8 else ReceiveMode.RECEIVE_AND_DELETE
                got = ns.receive(path, rng.randint(1, 4), mode)
                if mode == ReceiveMode.PEEK_LOCK:
                    held[path].extend((m, m.lock_token) for m in got)
                elif path.startswith("q"):
                    gone.update(m.message_id for m in got)
            elif op < 0.75 and held[path]:
                m, token = held[path].pop(rng.randrange(len(held[path])))
                action = rng.choice(["complete", "abandon", "defer", "dead_letter", "release", "renew"])
                if action == "complete":
                    ns.complete(path, [token])
                    if path.startswith("q"):
                        gone.add(m.message_id)
                elif action == "abandon":
                    ns.abandon(path, [token])
                elif action == "defer":
                    ns.defer(path, [token])
                elif action == "dead_letter" and "$DeadLetterQueue" not in path:
                    ns.dead_letter(path, [token], "r", "d")
                elif action == "release":
                    ns.release(path, [token])
                else:
                    ns.renew_lock(path, [token])
                    held[path].append((m, token))
            elif op < 0.8:
                deferred = [
                    m.sequence_number for m in ns.peek(path, 0, 1000) if m.state == 1 and m.lock_token is None
                ]
                if deferred:
                    got = ns.receive_deferred(path, [rng.choice(deferred)])
                    held[path].extend((m, m.lock_token) for m in got)
            else:
                clock.advance(rng.choice([1, 5, 11, 60]))
                ns.tick()
        except BrokerError:
            pass  # lost locks after expiry are expected; the invariants below must still hold
        if rng.random() < 0.1:
            ns.commit()  # what was sent, received or settled before and after a commit is stored alike
        check_bookkeeping(ns)
    return sent, gone


@pytest.mark.parametrize("window", [None, 3], ids=["window", "paged"])
@pytest.mark.parametrize("seed", range(6))
def test_random_streams_keep_every_message_exactly_once(
    seed: int, window: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if window is not None:  # main sub-queues keep 3 messages in memory, the rest in the store (paging.py)
        for module in ("placement", "fanout", "paging"):
            monkeypatch.setattr(f"local_broker.engine.{module}.WINDOW", window)
        monkeypatch.setattr("local_broker.engine.paging.PAGE", 2)
    clock = FakeClock()
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db", synchronous="OFF"), clock=clock)
    build(ns)
    rng = random.Random(seed)
    sent, gone = set(), set()
    for run in range(3):  # restarted in between: what a restart brings back goes on the same way
        more_sent, more_gone = drive(ns, clock, rng, 150, f"{run}-")
        sent |= more_sent
        gone |= more_gone
        ns.commit()
        before = snapshot(ns)
        ns.close()
        ns = Namespace.open(SqliteStore(tmp_path / "ns.db", synchronous="OFF"), clock=clock)
        assert snapshot(ns) == before
        check_bookkeeping(ns)
    present = [m.message_id for p in ("q", "q/$DeadLetterQueue") for m in ns.peek(p, 0, 100_000)]
    assert len(present) == len(set(present)), "a message is in two places"
    assert set(present) | gone == sent and not set(present) & gone
    rt = ns.get_queue_runtime_properties("q")
    assert rt.active_message_count + rt.scheduled_message_count == len(ns.peek("q", 0, 100_000))
    assert rt.dead_letter_message_count == len(ns.peek("q/$DeadLetterQueue", 0, 100_000))
    ns.commit()
    before = snapshot(ns)
    ns.close()
    again = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    assert snapshot(again) == before
    check_bookkeeping(again)


def check_sessions(ns: Namespace, now: float) -> None:
    sq = ns._queues["sq"].main
    for sid, s in sq.sessions.items():
        assert s.message_count == sum(1 for m in sq.messages.values() if m.session_id == sid)
        assert all(sq.locked[k] is m for k, m in s.locked.items())
    unlocked_with_ready = [
        sid
        for sid, s in sq.sessions.items()
        if (sid not in sq.session_locks or sq.session_locks[sid].locked_until <= now) and s.ready.has_ready()
    ]
    if unlocked_with_ready:  # next-available must find one of them
        assert any(sid in sq.available_sessions for sid in unlocked_with_ready)


@pytest.mark.parametrize("seed", range(6))
def test_random_session_streams(seed: int, tmp_path: Path) -> None:
    clock = FakeClock()
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db", synchronous="OFF"), clock=clock)
    ns.create_queue(
        QueueProperties(
            "sq", requires_session=True, lock_duration=timedelta(seconds=10), max_delivery_count=3
        )
    )
    rng = random.Random(seed)
    sent: set[str] = set()
    gone: set[str] = set()
    locks: dict[str, object] = {}
    held: list[tuple[str, object, str]] = []
    for step in range(400):
        op = rng.random()
        owner = rng.choice(["l1", "l2", "l3"])
        try:
            if op < 0.25:
                batch = [msg(message_id=f"m{step}-{i}", session_id=rng.choice("ABCD")) for i in range(2)]
                ns.send("sq", batch)
                sent.update(m.message_id for m in batch)
            elif op < 0.4:
                lock = ns.accept_session("sq", rng.choice([None, "A", "B", "C", "D"]), owner)
                locks[owner] = lock
            elif op < 0.6 and owner in locks:
                for m in ns.receive("sq", rng.randint(1, 3), session=locks[owner]):
                    held.append((m.message_id, m.lock_token, m.session_id))
            elif op < 0.8 and held:
                mid, token, sid = held.pop(rng.randrange(len(held)))
                action = rng.choice(["complete", "abandon", "defer"])
                getattr(ns, action)("sq", [token], session_id=sid)
                if action == "complete":
                    gone.add(mid)
            elif op < 0.85 and owner in locks:
                lock = locks.pop(owner)
                ns.release_session("sq", lock.session_id, owner)
            elif op < 0.9:
                ns.set_session_state("sq", rng.choice("ABCD"), rng.choice([None, b"s"]))
            else:
                clock.advance(rng.choice([1, 6, 11]))
                ns.tick()
        except BrokerError:
            pass
        check_bookkeeping_of(ns._queues["sq"])
        check_totals(ns)
        check_sessions(ns, clock.now())
    present = [m.message_id for p in ("sq", "sq/$DeadLetterQueue") for m in ns.peek(p, 0, 100_000)]
    assert len(present) == len(set(present))
    assert set(present) | gone == sent and not set(present) & gone
    ns.commit()
    before = {
        p: sorted((m.message_id, m.delivery_count, int(m.state)) for m in ns.peek(p, 0, 100_000))
        for p in ("sq", "sq/$DeadLetterQueue")
    }
    states = {s: ns.get_session_state("sq", s) for s in "ABCD"}
    ns.close()
    again = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    after = {
        p: sorted((m.message_id, m.delivery_count, int(m.state)) for m in again.peek(p, 0, 100_000))
        for p in before
    }
    assert after == before and {s: again.get_session_state("sq", s) for s in "ABCD"} == states
    check_sessions(again, clock.now())
    check_totals(again)
