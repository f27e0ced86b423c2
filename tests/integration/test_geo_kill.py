"""Kill -9 the process of a synchronously geo-replicated namespace mid-stream: the secondary (what a forced
promotion would serve) holds every acknowledged send and settlement; a restart seeds it from the primary."""

from __future__ import annotations

import textwrap
from pathlib import Path

from local_broker.engine import Namespace
from local_broker.geo.hosting import GeoHost
from local_broker.store import SqliteStore
from tests.integration.killed_child import run_until_killed
from topology import GeoReplicationSpec

# Acknowledges as an adapter does: a line is printed only after the commit returned.
CHILD = textwrap.dedent(
    """
    import itertools, sys
    from pathlib import Path
    from local_broker.engine import Message, QueueProperties
    from local_broker.engine.namespace import Namespace
    from local_broker.geo.hosting import GeoHost
    from topology import GeoReplicationSpec

    geo = GeoHost("orders", GeoReplicationSpec(["west", "north"], "west", "synchronous"), Path(sys.argv[1]))
    ns = Namespace.open(geo.store)
    ns.create_queue(QueueProperties("q"))  # a new data directory
    ns.commit()

    def acknowledged(kind, ids):
        print(kind, *ids, flush=True)

    for batch in itertools.count():
        ids = [f"m{batch}-{i}" for i in range(10)]
        ns.send("q", [Message(i.encode(), message_id=i) for i in ids])
        ns.commit()
        acknowledged("sent", ids)
        got = ns.receive("q", 4)
        acknowledged("completing", [m.message_id for m in got])
        ns.complete("q", [m.lock_token for m in got])
        ns.commit()
        acknowledged("completed", [m.message_id for m in got])
    """
)


def test_kill_during_synchronous_replication_loses_no_acknowledged_message(tmp_path: Path) -> None:
    seen: dict[str, set[str]] = {"sent": set(), "completing": set(), "completed": set()}

    def record(line: str) -> None:
        kind, _, rest = line.strip().partition(" ")
        seen[kind].update(rest.split())

    run_until_killed(CHILD, [str(tmp_path)], record, lambda: len(seen["sent"]) >= 1500)
    acknowledged = seen["sent"] - seen["completing"]

    def held(region: str) -> set[str]:
        ns = Namespace.open(SqliteStore(tmp_path / "regions" / region / "orders.db"))
        try:
            return {str(m.message_id) for m in ns.peek("q", 0, 100_000)}
        finally:
            ns.close()

    secondary = held("north")
    assert not acknowledged - secondary, "acknowledged sends missing on the secondary"
    assert not seen["completed"] & secondary, "acknowledged completions undone on the secondary"
    # a restart seeds the secondary from the primary again: both hold the same
    GeoHost("orders", GeoReplicationSpec(["west", "north"], "west", "synchronous"), tmp_path).store.close()
    assert held("north") == held("west")
