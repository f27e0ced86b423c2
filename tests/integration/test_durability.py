"""Kill the process holding the store mid-stream: nothing acknowledged is lost or undone."""

from __future__ import annotations

import textwrap
import uuid
from collections import Counter
from pathlib import Path

from local_broker.engine import Message, MessageState, Namespace
from local_broker.store import SqliteStore
from tests.integration.killed_child import run_until_killed

# The child acknowledges exactly as an adapter does: a line is printed only after the commit returned.
CHILD = textwrap.dedent(
    """
    import sys
    from local_broker.engine import Message, Namespace, QueueProperties, EntityAlreadyExistsError
    from local_broker.store import SqliteStore

    ns = Namespace.open(SqliteStore(sys.argv[1]))
    try:
        ns.create_queue(QueueProperties("q"))
    except EntityAlreadyExistsError:
        pass
    ns.commit()
    out = sys.stdout
    batch = 0
    while True:
        ids = [f"m{batch}-{i}" for i in range(20)]
        ns.send("q", [Message(b"payload-" + i.encode(), message_id=i) for i in ids])
        ns.commit()
        out.write("sent " + " ".join(ids) + "\\n")
        if batch % 2:
            got = ns.receive("q", 7)
            out.write("completing " + " ".join(m.message_id for m in got) + "\\n")
            out.flush()
            ns.complete("q", [m.lock_token for m in got])
            ns.commit()
            out.write("completed " + " ".join(m.message_id for m in got) + "\\n")
        else:
            got = ns.receive("q", 3)
            ns.abandon("q", [m.lock_token for m in got])
            ns.commit()
            out.write("abandoned " + " ".join(m.message_id for m in got) + "\\n")
            got = ns.receive("q", 2)
            ns.defer("q", [m.lock_token for m in got])
            ns.commit()
            out.write("deferred " + " ".join(m.message_id for m in got) + "\\n")
            (held,) = ns.receive("q", 1)  # left locked: its lock must survive the kill
            ns.commit()
            out.write(f"locked {held.message_id}={held.lock_token}\\n")
        out.flush()
        batch += 1
    """
)


def test_kill_mid_stream_loses_no_acknowledged_message(tmp_path: Path) -> None:
    path = tmp_path / "ns.db"
    sent: set[str] = set()
    attempted: set[str] = set()
    completed: set[str] = set()
    deferred: set[str] = set()
    abandons: Counter[str] = Counter()
    locks: dict[str, uuid.UUID] = {}

    def record(line: str) -> None:
        kind, _, rest = line.strip().partition(" ")
        names = rest.split()
        if kind == "abandoned":
            abandons.update(names)
        elif kind == "locked":
            name, _, token = rest.partition("=")
            locks[name] = uuid.UUID(token)
        else:
            {"sent": sent, "completing": attempted, "completed": completed, "deferred": deferred}[
                kind
            ].update(names)

    run_until_killed(CHILD, [str(path)], record, lambda: len(sent) >= 3000)

    ns = Namespace.open(SqliteStore(path))
    present = {m.message_id: m for p in ("q", "q/$DeadLetterQueue") for m in ns.peek(p, 0, 100_000)}
    missing = sent - attempted - set(present)
    assert not missing, f"acknowledged messages lost: {sorted(missing)[:10]}"
    assert not completed & set(present), "completed messages came back"
    assert all(present[i].body == b"payload-" + i.encode() for i in sent - attempted)
    # acknowledged state changes held too: delivery counts, deferral, locks
    assert abandons and deferred and locks
    for name, count in abandons.items():
        if name not in attempted:
            assert present[name].delivery_count >= count, name
    for name in deferred - attempted:
        assert present[name].state is MessageState.DEFERRED, name
    for name, token in locks.items():
        if name not in attempted:
            assert present[name].lock_token == token, name
    numbers = sorted(m.sequence_number for m in present.values())
    assert len(numbers) == len(set(numbers))
    # the namespace keeps working after the crash: new numbers continue above the old ones
    ns.send("q", Message(b"after", message_id="after"))
    (after,) = ns.peek("q", numbers[-1] + 1, 10)
    assert after.message_id == "after"
    ns.close()
