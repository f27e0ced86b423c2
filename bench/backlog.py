"""Outage-sized backlogs with the SQLite store: the memory, disk, restart and drain of N stored 1 KB messages.

Fills queue "backlog" with N messages through the engine and the SQLite store, in the file that
`sbfed broker serve --data DIR` opens for its default namespace (DIR/sbemulatorns.db), committing every
1,000 as a broker's turns would (filling 1 M through an SDK takes far longer and measures the wire, not
the store). Then, on that data:

- a real `sbfed broker serve --data DIR` process is started: seconds from its start to ready (its ready
  file written) and to the first message an AMQP client receives (bench/amqp_client.py, peek-lock, settled);
  its RSS then, per stored message, beside an empty broker's RSS;
- the store's bytes per message (the .db file and its write-ahead log);
- what a peek-lock receive + complete through the azure-servicebus SDK costs the broker (CPU per message,
  from /proc), through `--sdk` messages of the deep backlog against a shallow queue (1,000 sent, then
  received and completed), in alternating rounds of ROUND so both see the same machine;
- the drain rate in process: peek-lock receive of 100 + complete + commit per batch, through `--drain`
  messages at the head of the deep backlog (after the SDK's), against the same on a shallow queue (1,000
  sent, then drained, repeated; only the draining is timed), in wall time and in CPU time.

    .venv/bin/python bench/backlog.py [--messages 1000000] [--drain 100000] [--sdk 20000] [--sync normal|full]
                                      [--keep DIR]
    .venv/bin/python bench/backlog.py --messages 10000000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiver

from local_broker.engine import Message, Namespace, NamespaceConfig, QueueProperties, ReceiveMode
from local_broker.store import SqliteStore
from local_broker.wire.amqp import codec

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "sbemulatorns"  # what `sbfed broker serve` with no topology serves
KEY = "SAS_KEY_VALUE"
PAYLOAD = b"x" * 1024
# As the wire keeps a body: its AMQP data section.
BODY = codec.described(codec.DATA, b"\xb0" + len(PAYLOAD).to_bytes(4, "big") + PAYLOAD)
FILL_BATCH = 1000
BATCH = 100
ROUND = 2000  # messages per alternating round of the SDK's deep and shallow receives
WARM_UP = 200  # messages of the SDK's first round (connections, links, first pages), not counted
CLK_TCK = os.sysconf("SC_CLK_TCK")


def fill(path: Path, total: int, sync: str) -> float:
    """N messages into queue "backlog"; returns messages per second."""
    ns = Namespace.open(SqliteStore(path, synchronous=sync), config=NamespaceConfig(name=NAMESPACE))
    ns.create_queue(QueueProperties("backlog", max_size_in_megabytes=81920))
    ns.create_queue(QueueProperties("shallow"))
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


@contextlib.contextmanager
def broker(data: Path, sync: str) -> Iterator[tuple[subprocess.Popen, float, dict]]:
    """A `sbfed broker serve --data` process on `data`, once ready: the process, seconds to ready and its
    ready file's namespace."""
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
        yield proc, time.time() - start, json.loads(ready.read_text())[0]
    finally:
        proc.terminate()
        proc.wait(60)


def serve(data: Path, sync: str, first_message: bool) -> dict:
    """Start a broker on `data`: seconds to ready and to the first message, and its RSS after that."""
    start = time.time()
    with broker(data, sync) as (proc, to_ready, namespace):
        to_first = None
        if first_message:
            client = subprocess.run(
                [sys.executable, str(ROOT / "bench" / "amqp_client.py"), "receive", "--url",
                 f"amqp://127.0.0.1:{namespace['amqp_port']}", "--address", "backlog", "--user",
                 "RootManageSharedAccessKey", "--password", KEY, "-n", "1", "--prefetch", "1", "--timeout",
                 "600"],
                capture_output=True, text=True, check=False,
            )
            outcome = json.loads(client.stdout.strip().splitlines()[-1])
            if outcome["error"] or outcome["messages"] != 1:
                raise SystemExit(f"the first message did not arrive: {outcome}")
            to_first = outcome["finished"] - start
        time.sleep(0.5)
        return {"ready_s": to_ready, "first_message_s": to_first, "rss": rss_bytes(proc.pid)}


def process_cpu(pid: int) -> float:
    """utime + stime of a process, seconds."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def sdk_costs(data: Path, sync: str, count: int) -> tuple[float, float]:
    """Broker CPU seconds per message of a peek-lock receive + complete through the SDK (prefetch 100),
    from the deep backlog and from queue "shallow" (sent ROUND at a time, the sending not counted), in
    alternating rounds. Each round's CPU is read once the broker is idle again, so what a receiver's
    credit brings in after its last complete counts in its own round."""
    def take(receiver: ServiceBusReceiver, n: int) -> None:
        while n > 0:
            got = receiver.receive_messages(max_message_count=min(BATCH, n), max_wait_time=30)
            if not got:
                raise SystemExit(f"{receiver.entity_path} ran dry")
            for message in got:
                receiver.complete_message(message)
            n -= len(got)

    def measured(pid: int, work: Callable[[], None]) -> float:
        time.sleep(0.3)
        before = process_cpu(pid)
        work()
        time.sleep(0.3)
        return process_cpu(pid) - before

    deep = shallow = 0.0
    with broker(data, sync) as (proc, _, namespace), \
            ServiceBusClient.from_connection_string(namespace["connection_string"]) as client, \
            client.get_queue_receiver("backlog", prefetch_count=BATCH) as deep_receiver, \
            client.get_queue_receiver("shallow", prefetch_count=BATCH) as shallow_receiver, \
            client.get_queue_sender("shallow") as sender:
        for done in range(-ROUND, count, ROUND):  # the first round warms up
            n = WARM_UP if done < 0 else min(ROUND, count - done)
            for first in range(0, n, 200):  # a batch holds at most 256 KB
                sender.send_messages([ServiceBusMessage(PAYLOAD) for _ in range(min(200, n - first))])
            shallow_cpu = measured(proc.pid, lambda: take(shallow_receiver, n))  # noqa: B023
            deep_cpu = measured(proc.pid, lambda: take(deep_receiver, n))  # noqa: B023
            if done >= 0:
                shallow += shallow_cpu
                deep += deep_cpu
    return deep / count, shallow / count


def drain(ns: Namespace, path: str, count: int) -> tuple[float, float]:
    """Seconds (wall, CPU) to receive (peek-lock, BATCH at a time), complete and commit `count` messages,
    and to delete them from the database (settlements are logged first; a broker's next transaction
    deletes them)."""
    start, cpu = time.perf_counter(), time.process_time()
    done = 0
    while done < count:
        got = ns.receive(path, min(BATCH, count - done), ReceiveMode.PEEK_LOCK)
        if not got:
            raise SystemExit(f"{path} ran dry after {done} messages")
        ns.complete(path, [m.lock_token for m in got])
        ns.commit()
        ns.next_deadline()  # what a broker's turn asks
        done += len(got)
    ns._store.fold()  # the settled log folded in
    return time.perf_counter() - start, time.process_time() - cpu


def drain_rates(path: Path, sync: str, count: int) -> dict[str, float]:
    """Messages per second (of wall and of CPU time) drained from the deep backlog's head, and from a
    shallow queue, alternating rounds of FILL_BATCH."""
    ns = Namespace.open(SqliteStore(path, synchronous=sync), config=NamespaceConfig(name=NAMESPACE))
    spent = {"deep": 0.0, "deep_cpu": 0.0, "shallow": 0.0, "shallow_cpu": 0.0}
    for first in range(0, count, FILL_BATCH):
        size = min(FILL_BATCH, count - first)
        ns.send("shallow", [Message(BODY, message_id=str(first + i)) for i in range(size)])
        ns.commit()
        for queue in ("shallow", "backlog"):
            wall, cpu = drain(ns, queue, size)
            kind = "deep" if queue == "backlog" else queue
            spent[kind] += wall
            spent[kind + "_cpu"] += cpu
    ns.close()
    return {kind: count / seconds for kind, seconds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--drain", type=int, default=100_000, help="messages drained deep and shallow")
    parser.add_argument("--sdk", type=int, default=20_000,
                        help="messages received + completed through the SDK, deep and shallow (0: none)")
    parser.add_argument("--sync", choices=("normal", "full"), default="normal")
    parser.add_argument("--keep", type=Path, help="fill this directory (kept) instead of a temporary one")
    args = parser.parse_args()
    n = args.messages
    through_sdk = min(args.sdk, max(0, n // 2 - WARM_UP))
    drained = min(args.drain, n - 1 - through_sdk)
    if drained < 1:
        parser.error(f"nothing to drain: --drain must be at least 1, --messages above {through_sdk + 1}")

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
        sdk_deep = sdk_shallow = None
        if through_sdk:
            sdk_deep, sdk_shallow = sdk_costs(data, args.sync, through_sdk)
            print(f"through the SDK, {through_sdk:,} peek-lock receive + complete (prefetch {BATCH}), broker "
                  f"CPU per message: deep backlog {sdk_deep * 1e6:,.1f} us, shallow queue "
                  f"{sdk_shallow * 1e6:,.1f} us: deep/shallow rate {sdk_shallow / sdk_deep:.2f} "
                  "(target >= 0.80)", flush=True)
        rates = drain_rates(db, args.sync.upper(), drained)
        print(f"in process, drain {drained:,} (receive {BATCH} + complete + commit, deep and shallow in "
              f"turns): deep backlog {rates['deep']:,.0f} msg/s, shallow queue {rates['shallow']:,.0f} "
              "msg/s: "
              f"deep/shallow {rates['deep'] / rates['shallow']:.2f} (target >= 0.80); per CPU-second "
              f"{rates['deep_cpu']:,.0f} / {rates['shallow_cpu']:,.0f}: "
              f"{rates['deep_cpu'] / rates['shallow_cpu']:.2f}")
        print(json.dumps({"messages": n, "store_bytes_per_message": stored / n, "ready_s": broker["ready_s"],
                          "first_message_s": broker["first_message_s"], "empty_ready_s": empty["ready_s"],
                          "rss": broker["rss"],
                          "empty_rss": empty["rss"], "rss_per_message": per_message,
                          "rss_above_empty_per_message": above_empty, "drained": drained,
                          "deep_msg_per_s": rates["deep"], "shallow_msg_per_s": rates["shallow"],
                          "deep_msg_per_cpu_s": rates["deep_cpu"],
                          "shallow_msg_per_cpu_s": rates["shallow_cpu"],
                          "sdk_messages": through_sdk, "sdk_deep_broker_cpu_per_msg": sdk_deep,
                          "sdk_shallow_broker_cpu_per_msg": sdk_shallow}))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
