"""Outage-sized backlogs with the SQLite store: the memory, disk, restart and drain of N stored 1 KB messages.

Fills queue "backlog" with N messages through the engine and the SQLite store, in the file that
`sbfed broker serve --data DIR` opens for its default namespace (DIR/sbemulatorns.db), committing every
1,000 as a broker's turns would (filling 1 M through an SDK takes far longer and measures the wire, not
the store). Then, on that data:

- a real `sbfed broker serve --data DIR` process is started: seconds from its start to ready (its ready
  file written) and to the first message an AMQP client receives (bench/amqp_client.py, peek-lock, settled);
  its RSS then, per stored message, beside an empty broker's RSS;
- the store's bytes per message (the .db file and its write-ahead log);
- the drain rate in process: peek-lock receive of 100 + complete + commit per batch, through `--drain`
  messages at the head of the deep backlog, against the same on a shallow queue (1,000 sent, then drained,
  repeated; only the draining is timed).

    .venv/bin/python bench/backlog.py [--messages 1000000] [--drain 100000] [--sync normal|full] [--keep DIR]
    .venv/bin/python bench/backlog.py --messages 10000000
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from local_broker.engine import Message, Namespace, NamespaceConfig, QueueProperties, ReceiveMode
from local_broker.store import ChangeSet, SqliteStore

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "sbemulatorns"  # what `sbfed broker serve` with no topology serves
KEY = "SAS_KEY_VALUE"
BODY = b"x" * 1024
FILL_BATCH = 1000
BATCH = 100


def fill(path: Path, total: int, sync: str) -> float:
    """N messages into queue "backlog"; returns messages per second."""
    ns = Namespace.open(SqliteStore(path, synchronous=sync), config=NamespaceConfig(name=NAMESPACE))
    ns.create_queue(QueueProperties("backlog", max_size_in_megabytes=81920))
    ns.commit()
    start = time.perf_counter()
    for first in range(0, total, FILL_BATCH):
        count = min(FILL_BATCH, total - first)
        ns.send("backlog", [Message(BODY, message_id=str(first + i)) for i in range(count)])
        ns.commit()
    rate = total / (time.perf_counter() - start)
    ns.close()
    return rate


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def serve(data: Path, sync: str, first_message: bool) -> dict:
    """Start a broker on `data`: seconds to ready and to the first message, and its RSS after that."""
    ready = data.parent / f"ready-{time.monotonic_ns()}.json"
    command = [sys.executable, "-m", "sbfed.cli", "broker", "serve", "--data", str(data), "--sync", sync,
               "--amqp-port", "0", "--admin-port", "0", "--amqps-port", "0", "--websocket-port", "0",
               "--ready-file", str(ready), "--log-level", "WARNING"]
    start = time.time()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        while not ready.exists():
            if proc.poll() is not None or time.time() > start + 600:
                raise SystemExit("the broker did not start")
            time.sleep(0.01)
        to_ready = time.time() - start
        to_first = None
        if first_message:
            port = json.loads(ready.read_text())[0]["amqp_port"]
            client = subprocess.run(
                [sys.executable, str(ROOT / "bench" / "amqp_client.py"), "receive", "--url",
                 f"amqp://127.0.0.1:{port}", "--address", "backlog", "--user", "RootManageSharedAccessKey",
                 "--password", KEY, "-n", "1", "--prefetch", "1", "--timeout", "600"],
                capture_output=True, text=True, check=False,
            )
            outcome = json.loads(client.stdout.strip().splitlines()[-1])
            if outcome["error"] or outcome["messages"] != 1:
                raise SystemExit(f"the first message did not arrive: {outcome}")
            to_first = outcome["finished"] - start
        time.sleep(0.5)
        return {"ready_s": to_ready, "first_message_s": to_first, "rss": rss_bytes(proc.pid)}
    finally:
        proc.terminate()
        proc.wait(60)


def drain(ns: Namespace, path: str, count: int) -> float:
    """Seconds to receive (peek-lock, BATCH at a time), complete and commit `count` messages, and to delete
    them from the database (settlements are logged first; a broker's next transaction deletes them)."""
    start = time.perf_counter()
    done = 0
    while done < count:
        got = ns.receive(path, min(BATCH, count - done), ReceiveMode.PEEK_LOCK)
        if not got:
            raise SystemExit(f"{path} ran dry after {done} messages")
        ns.complete(path, [m.lock_token for m in got])
        ns.commit()
        ns.next_deadline()  # what a broker's turn asks
        done += len(got)
    ns._store.write(ChangeSet())  # the settled log folded in
    return time.perf_counter() - start


def drain_rates(path: Path, sync: str, count: int) -> tuple[float, float]:
    """Messages per second drained from the deep backlog's head, and from a shallow queue."""
    ns = Namespace.open(SqliteStore(path, synchronous=sync), config=NamespaceConfig(name=NAMESPACE))
    deep = count / drain(ns, "backlog", count)
    ns.create_queue(QueueProperties("shallow"))
    ns.commit()
    spent = 0.0
    for first in range(0, count, FILL_BATCH):
        size = min(FILL_BATCH, count - first)
        ns.send("shallow", [Message(BODY, message_id=str(first + i)) for i in range(size)])
        ns.commit()
        spent += drain(ns, "shallow", size)
    ns.close()
    return deep, count / spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--drain", type=int, default=100_000, help="messages drained deep and shallow")
    parser.add_argument("--sync", choices=("normal", "full"), default="normal")
    parser.add_argument("--keep", type=Path, help="fill this directory (kept) instead of a temporary one")
    args = parser.parse_args()
    n, drained = args.messages, min(args.drain, args.messages - 1)

    work = Path(tempfile.mkdtemp(prefix="sbfed-backlog-")) if args.keep is None else args.keep
    try:
        empty = serve(work / "empty", args.sync, False)
        data = work / "data"
        data.mkdir(parents=True, exist_ok=True)
        db = data / f"{NAMESPACE}.db"
        print(f"filling {n:,} messages of 1 KB into {db} (engine + SQLite store, synchronous={args.sync})",
              flush=True)
        rate = fill(db, n, args.sync.upper())
        stored = sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())
        print(f"filled at {rate:,.0f} msg/s; store {stored / n:,.0f} bytes per message", flush=True)
        broker = serve(data, args.sync, True)
        per_message = broker["rss"] / n
        above_empty = (broker["rss"] - empty["rss"]) / n
        grown = broker["first_message_s"] - empty["ready_s"]
        print(f"broker restart on {n:,} messages: ready in {broker['ready_s']:.2f} s, first message in "
              f"{broker['first_message_s']:.2f} s (an empty broker is ready in {empty['ready_s']:.2f} s: the "
              f"backlog adds {grown:.2f} s, {grown / n * 1e6:.2f} s per million; target <= 1)")
        print(f"broker RSS {broker['rss'] / 2**20:,.1f} MB (empty broker {empty['rss'] / 2**20:,.1f} MB): "
              f"{per_message:,.1f} bytes per stored message, {above_empty:,.1f} above the empty broker's "
              "(target <= 200)", flush=True)
        deep, shallow = drain_rates(db, args.sync.upper(), drained)
        print(f"drain {drained:,} (receive {BATCH} + complete + commit): deep backlog {deep:,.0f} msg/s, "
              f"shallow queue {shallow:,.0f} msg/s: deep/shallow {deep / shallow:.2f} (target >= 0.80)")
        print(json.dumps({"messages": n, "store_bytes_per_message": stored / n, "ready_s": broker["ready_s"],
                          "first_message_s": broker["first_message_s"], "empty_ready_s": empty["ready_s"],
                          "rss": broker["rss"],
                          "empty_rss": empty["rss"], "rss_per_message": per_message,
                          "rss_above_empty_per_message": above_empty, "drained": drained,
                          "deep_msg_per_s": deep, "shallow_msg_per_s": shallow}))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
