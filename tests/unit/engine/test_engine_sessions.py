"""Sessions: accept named / next available, locks, renewal, expiry, release, state, listing, refusals."""

from __future__ import annotations

from datetime import timedelta

import pytest

from local_broker.engine import (
    MessageLockLostError,
    Namespace,
    NotAllowedError,
    OperationTimeoutError,
    QueueProperties,
    ReceiveMode,
    SessionCannotBeLockedError,
    SessionLockLostError,
)

from .helpers import ids, msg


@pytest.fixture
def sq(ns: Namespace) -> str:
    ns.create_queue(
        QueueProperties(
            "sq", requires_session=True, lock_duration=timedelta(seconds=30), max_delivery_count=2
        )
    )
    return "sq"


def test_message_without_session_id_is_refused(ns: Namespace, sq: str) -> None:
    with pytest.raises(NotAllowedError) as err:
        ns.send(sq, msg())
    assert "SessionId was not set" in err.value.description
    assert err.value.amqp_condition == "amqp:not-allowed"


def test_receivers_must_match_the_entity(ns: Namespace, sq: str) -> None:
    ns.create_queue(QueueProperties("plain"))
    with pytest.raises(NotAllowedError) as err:
        ns.check_receiver(sq)
    assert "requires sessions" in err.value.description
    with pytest.raises(NotAllowedError):
        ns.receive(sq, 1)
    with pytest.raises(NotAllowedError):
        ns.accept_session("plain", None, "link")
    assert ns.check_receiver(sq, sessionful=True) == "sq"
    assert ns.check_receiver(f"{sq}/$DeadLetterQueue") == "sq/$DeadLetterQueue"  # the DLQ has no sessions


def test_accept_named_session_and_receive_in_order(ns: Namespace, sq: str, clock) -> None:
    ns.send(sq, [msg(message_id=f"{s}{i}", session_id=s) for i in range(3) for s in "AB"])
    lock = ns.accept_session(sq, "A", "link1")
    assert lock.session_id == "A" and lock.locked_until == clock.now() + 30
    got = ns.receive(sq, 10, session=lock)
    assert ids(got) == ["A0", "A1", "A2"]
    assert all(m.locked_until == lock.locked_until for m in got)
    ns.complete(sq, [m.lock_token for m in got], session_id="A")
    assert ns.list_sessions(sq) == ["B"]


def test_second_holder_is_refused(ns: Namespace, sq: str) -> None:
    ns.send(sq, msg(session_id="A"))
    first = ns.accept_session(sq, "A", "link1")
    with pytest.raises(SessionCannotBeLockedError) as err:
        ns.accept_session(sq, "A", "link2")
    assert err.value.amqp_condition == "com.microsoft:session-cannot-be-locked"
    assert ns.accept_session(sq, "A", "link1") is first  # the same owner gets its lock back


def test_next_available_skips_locked_and_empty(ns: Namespace, sq: str) -> None:
    with pytest.raises(OperationTimeoutError) as err:
        ns.accept_session(sq, None, "l0")
    assert err.value.amqp_condition == "com.microsoft:timeout"
    ns.send(sq, [msg(session_id="A"), msg(session_id="B")])
    a = ns.accept_session(sq, None, "l1")
    b = ns.accept_session(sq, None, "l2")
    assert {a.session_id, b.session_id} == {"A", "B"}
    with pytest.raises(OperationTimeoutError):
        ns.accept_session(sq, None, "l3")


def test_session_lock_expiry_raises_delivery_count_and_frees_session(ns: Namespace, sq: str, clock) -> None:
    ns.send(sq, msg(message_id="m", session_id="A"))
    lock = ns.accept_session(sq, "A", "link1")
    (m,) = ns.receive(sq, 1, session=lock)
    clock.advance(30)
    with pytest.raises(SessionLockLostError):
        ns.receive(sq, 1, session=lock)
    with pytest.raises(SessionLockLostError):
        ns.complete(sq, [m.lock_token], session_id="A")
    ns.tick()
    lock2 = ns.accept_session(sq, None, "link2")
    (again,) = ns.receive(sq, 1, session=lock2)
    assert again.delivery_count == 1
    clock.advance(30)
    ns.tick()  # second expiry reaches max delivery count 2
    assert ns.get_queue_runtime_properties(sq).dead_letter_message_count == 1


def test_renew_session_lock(ns: Namespace, sq: str, clock) -> None:
    ns.send(sq, msg(session_id="A"))
    lock = ns.accept_session(sq, "A", "link1")
    (m,) = ns.receive(sq, 1, session=lock)
    clock.advance(20)
    until = ns.renew_session_lock(sq, "A", "link1")
    assert until == clock.now() + 30 == lock.locked_until == m.locked_until
    clock.advance(20)
    ns.tick()
    with pytest.raises(NotAllowedError):
        ns.renew_lock(sq, [m.lock_token])
    ns.complete(sq, [m.lock_token], session_id="A")
    with pytest.raises(SessionLockLostError):
        ns.renew_session_lock(sq, "A", "other-link")


def test_release_session_returns_messages_without_increment(ns: Namespace, sq: str) -> None:
    ns.send(sq, msg(session_id="A"))
    lock = ns.accept_session(sq, "A", "link1")
    (m,) = ns.receive(sq, 1, session=lock)
    token = m.lock_token
    ns.release_session(sq, "A", "link1")
    with pytest.raises(MessageLockLostError):
        ns.complete(sq, [token])
    lock2 = ns.accept_session(sq, None, "link2")
    (again,) = ns.receive(sq, 1, session=lock2)
    assert again.delivery_count == 0


def test_session_state(ns: Namespace, sq: str) -> None:
    assert ns.get_session_state(sq, "S") is None
    ns.set_session_state(sq, "S", b"state-bytes")
    assert ns.get_session_state(sq, "S") == b"state-bytes"
    assert ns.list_sessions(sq) == ["S"]  # a session with state but no messages is listed
    assert ns.get_queue_runtime_properties(sq).size_in_bytes == len(b"state-bytes")
    ns.set_session_state(sq, "S", None)
    assert ns.list_sessions(sq) == []
    assert ns.get_queue_runtime_properties(sq).size_in_bytes == 0


def test_list_sessions_paging(ns: Namespace, sq: str) -> None:
    ns.send(sq, [msg(session_id=f"s{i:02}") for i in range(5)])
    assert ns.list_sessions(sq, skip=1, top=2) == ["s01", "s02"]


def test_deferred_in_session(ns: Namespace, sq: str) -> None:
    ns.send(sq, msg(message_id="d", session_id="A"))
    lock = ns.accept_session(sq, "A", "link1")
    (m,) = ns.receive(sq, 1, session=lock)
    ns.defer(sq, [m.lock_token], session_id="A")
    with pytest.raises(NotAllowedError):
        ns.receive_deferred(sq, [m.sequence_number])
    (d,) = ns.receive_deferred(sq, [m.sequence_number], ReceiveMode.PEEK_LOCK, session_id="A")
    ns.complete(sq, [d.lock_token], session_id="A")
    assert ns.peek(sq, 0, 5) == []


def test_peek_by_session(ns: Namespace, sq: str) -> None:
    ns.send(sq, [msg(message_id="a", session_id="A"), msg(message_id="b", session_id="B")])
    assert ids(ns.peek(sq, 0, 10, session_id="B")) == ["b"]


def test_session_available_callback(ns: Namespace, sq: str) -> None:
    seen: list[str] = []
    ns.on_available(seen.append)
    ns.send(sq, msg(session_id="A"))
    assert seen == ["sq"]
    lock = ns.accept_session(sq, "A", "l")
    seen.clear()
    ns.send(sq, msg(session_id="A"))  # the locked session's holder does not need a wake-up for others
    ns.release_session(sq, "A", "l")
    assert seen == ["sq"]
    assert lock.session_id == "A"


def test_the_owner_of_an_expired_session_lock_is_told(ns: Namespace, sq: str, clock) -> None:
    """The AMQP adapter detaches that receiver (com.microsoft:session-lock-lost); a renewed lock, a released
    one and another session's tell nobody."""
    lost: list[object] = []
    ns.on_session_lost(lost.append)
    for sid in "ABC":
        ns.send(sq, msg(session_id=sid))
    ns.accept_session(sq, "A", "expires")
    ns.accept_session(sq, "B", "renews")
    ns.accept_session(sq, "C", "releases")
    ns.release_session(sq, "C", "releases")
    clock.advance(20)
    ns.renew_session_lock(sq, "B", "renews")
    clock.advance(10)
    ns.tick()
    assert lost == ["expires"]
