"""Engine throughput: send -> peek-lock receive -> complete of 1 KB messages, in process.

Models the reactor: each turn sends batch k, receives batch k-1, completes batch k-2, then commits
once, so with the durable store every message is inserted, lock-updated and deleted on disk
(nothing is coalesced away). Prints messages per second for the in-memory and the SQLite store.

    .venv/bin/python bench/engine.py [--messages N] [--batch B] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

from local_broker.engine import FakeClock, Message, Namespace, QueueProperties, ReceiveMode
from local_broker.store import MemoryStore, SqliteStore

BODY = b"x" * 1024


def run(ns: Namespace, total: int, batch: int) -> float:
    """Messages per second through send, receive and complete (all committed)."""
    ns.create_queue(QueueProperties("bench"))
    ns.commit()
    turns = total // batch
    received: list[Message] = []
    sent_ids = 0
    start = time.perf_counter()
    for turn in range(turns + 2):
        if received:
            ns.complete("bench", [m.lock_token for m in received])
        received = ns.receive("bench", batch, ReceiveMode.PEEK_LOCK) if turn >= 1 else []
        if turn < turns:
            ns.send("bench", [Message(BODY, message_id=str(sent_ids + i)) for i in range(batch)])
            sent_ids += batch
        ns.commit()
    elapsed = time.perf_counter() - start
    assert ns.get_queue_runtime_properties("bench").total_message_count == 0
    return turns * batch / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="cProfile the in-memory run")
    args = parser.parse_args()

    memory = Namespace.open(MemoryStore(), clock=FakeClock())
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
    rate = run(memory, args.messages, args.batch)
    if args.profile:
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
    print(f"in-memory store: {rate:>10,.0f} msg/s  (target 100,000)  1 KB, batch {args.batch}")

    with tempfile.TemporaryDirectory() as tmp:
        for sync in ("NORMAL", "FULL"):
            store = SqliteStore(Path(tmp) / f"bench-{sync}.db", synchronous=sync)
            durable = Namespace.open(store, clock=FakeClock())
            rate = run(durable, args.messages // 2, args.batch)
            durable.close()
            print(
                f"SQLite WAL, synchronous={sync:<6}: {rate:>10,.0f} msg/s  (target 20,000)  "
                f"one commit per turn, every message written, lock-updated and deleted"
            )


if __name__ == "__main__":
    main()
