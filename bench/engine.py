"""Engine throughput: send -> peek-lock receive -> complete of 1 KB messages, in process.

Models the reactor: each turn sends batch k, receives batch k-1, completes batch k-2, then commits
once, so with the durable store every message is inserted, lock-updated and deleted on disk
(nothing is coalesced away). Prints messages per second for the in-memory and the SQLite store, and for a
geo-replicated namespace (docs/geo-replication.md: two SQLite stores, synchronous and asynchronous).

    .venv/bin/python bench/engine.py [--messages N] [--batch B] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from local_broker.engine import FakeClock, Message, Namespace, QueueProperties, ReceiveMode
from local_broker.geo.store import GeoStore, Replica
from local_broker.store import MemoryStore, SqliteStore

BODY = b"x" * 1024


@dataclass(frozen=True)
class Rate:
    wall: float  # messages per second of elapsed time
    cpu: float  # messages per second of this process's CPU time (what a quiet machine would approach)


def run(
    ns: Namespace, total: int, batch: int, queue: QueueProperties | None = None, **fields: object
) -> Rate:
    """Messages per second through send, receive and complete (all committed).

    `fields` are extra Message arguments (e.g. partition_key) for every message sent.
    """
    ns.create_queue(queue or QueueProperties("bench"))
    ns.commit()
    turns = total // batch
    received: list[Message] = []
    sent_ids = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    for turn in range(turns + 2):
        if received:
            ns.complete("bench", [m.lock_token for m in received])
        received = ns.receive("bench", batch, ReceiveMode.PEEK_LOCK) if turn >= 1 else []
        if turn < turns:
            ns.send("bench", [Message(BODY, message_id=str(sent_ids + i), **fields) for i in range(batch)])
            sent_ids += batch
        ns.commit()
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    assert ns.get_queue_runtime_properties("bench").total_message_count == 0
    return Rate(turns * batch / elapsed, turns * batch / cpu)


def _normal(path: Path) -> SqliteStore:
    return SqliteStore(path, synchronous="NORMAL")


def geo_run(folder: Path, total: int, batch: int, synchronous: bool) -> Rate:
    """`run` on a namespace replicated from one SQLite store to another; asynchronous counts the time until
    the secondary has everything too."""
    replicas = [Replica(region, folder / f"{region}.db", _normal(folder / f"{region}.db"))
                for region in ("west", "north")]
    store = GeoStore(replicas, "west", synchronous, 3600.0, _normal)
    stopped = threading.Event()
    shipper = threading.Thread(target=store.ship_until, args=(stopped,), daemon=True)
    shipper.start()
    ns = Namespace.open(store, clock=FakeClock())
    start, cpu_start = time.perf_counter(), time.process_time()
    run(ns, total, batch)
    while store.log.entries:  # everything on the secondary
        time.sleep(0.001)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    stopped.set()
    shipper.join()
    ns.close()
    return Rate(total // batch * batch / elapsed, total // batch * batch / cpu)


def _report(label: str, rates: list[Rate], target: str) -> None:
    wall = [r.wall for r in rates]
    cpu = statistics.median(r.cpu for r in rates)
    print(
        f"{label:<30} median {statistics.median(wall):>8,.0f} msg/s  best {max(wall):>8,.0f} msg/s  "
        f"per CPU-second {cpu:>8,.0f}  (target {target})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one in-memory run")
    args = parser.parse_args()

    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        run(Namespace.open(MemoryStore(), clock=FakeClock()), args.messages, args.batch)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
        return
    print(
        f"send -> peek-lock receive -> complete, 1 KB messages, batch {args.batch}, {args.repeat} runs each"
    )
    rates = [
        run(Namespace.open(MemoryStore(), clock=FakeClock()), args.messages, args.batch)
        for _ in range(args.repeat)
    ]
    _report("in-memory store", rates, "100,000")
    with tempfile.TemporaryDirectory() as tmp:
        for sync in ("NORMAL", "FULL"):
            rates = []
            for i in range(args.repeat):
                durable = Namespace.open(
                    SqliteStore(Path(tmp) / f"{sync}-{i}.db", synchronous=sync), clock=FakeClock()
                )
                rates.append(run(durable, args.messages // 2, args.batch))
                durable.close()
            _report(f"SQLite WAL synchronous={sync}", rates, "20,000")
        for synchronous in (True, False):
            rates = []
            for i in range(args.repeat):
                folder = Path(tmp) / f"geo-{synchronous}-{i}"
                folder.mkdir()
                rates.append(geo_run(folder, args.messages // 2, args.batch, synchronous))
            mode = "synchronous" if synchronous else "asynchronous"
            _report(f"geo-replicated, {mode}", rates, "half of NORMAL")
    # What a server process can do once it has started: keep the start-up objects out of the collector
    # and collect the young generation less often (messages live only from send to settlement).
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    rates = [
        run(Namespace.open(MemoryStore(), clock=FakeClock()), args.messages, args.batch)
        for _ in range(args.repeat)
    ]
    _report("in-memory store, GC tuned", rates, "100,000")


if __name__ == "__main__":
    main()
