"""Memory of the broker while clients come and go: does what a connection took come back?

    python bench/connection_churn.py [--connections 1000]
        [--soak-seconds 0 [--rate 300] [--churn-every 30] [--warm-up S]]

Starts `sbfed broker serve --in-memory` as its own process (its GC settings are the ones users get) and reads
its resident memory (VmRSS in /proc) while this process drives it with the azure-servicebus SDK:

1. churn: --connections clients, 25 at a time, each connects, sends one message and closes; prints the
   broker's RSS before, after, and after the broker has been idle for a few seconds, and the bytes per
   connection that stayed;
2. soak (with --soak-seconds): a sender and a receiver exchange --rate messages/s, and every --churn-every
   seconds both close their connections and open new ones; after a warm-up (the first third, at least 60 s)
   it prints the RSS growth per minute. Target: < 100 KB/min.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.chaos.harness import BrokerProcess, topology  # noqa: E402

SETTLE_S = 5.0
PARALLEL = 25  # clients connected at once during the churn


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def churn(broker: BrokerProcess, connections: int) -> None:
    def one(i: int) -> None:
        with ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client, \
                client.get_queue_sender("churn") as sender:
            sender.send_messages(ServiceBusMessage(f"{i}"))

    with ThreadPoolExecutor(PARALLEL) as pool:  # an SDK client takes about a second to open and close
        list(pool.map(one, range(2 * PARALLEL)))  # what is made once (codecs, caches): before the baseline
        time.sleep(SETTLE_S)
        before = rss_kb(broker.pid)
        started = time.monotonic()
        list(pool.map(one, range(connections)))
    elapsed = time.monotonic() - started
    after = rss_kb(broker.pid)
    time.sleep(SETTLE_S)
    settled = rss_kb(broker.pid)
    print(f"churn: {connections} connections in {elapsed:.0f} s ({connections / elapsed:.0f}/s); broker RSS "
          f"{before / 1024:.1f} MB before, {after / 1024:.1f} MB after, {settled / 1024:.1f} MB "
          f"{SETTLE_S:.0f} s later: {(settled - before) * 1024 / connections:,.0f} bytes per connection "
          "stayed", flush=True)


def soak(broker: BrokerProcess, seconds: float, rate: float, churn_every: float,
         warm_up: float | None = None) -> None:
    stop = threading.Event()
    received = [0]
    sent = [0]

    def send() -> None:
        interval = 0.1
        per_tick = max(1, round(rate * interval))
        while not stop.is_set():
            generation_ends = time.monotonic() + churn_every
            with ServiceBusClient.from_connection_string(broker.connection_string) as client, \
                    client.get_queue_sender("soak") as sender:
                next_at = time.monotonic()
                while not stop.is_set() and time.monotonic() < generation_ends:
                    sender.send_messages([ServiceBusMessage(b"x" * 256) for _ in range(per_tick)])
                    sent[0] += per_tick
                    next_at += interval
                    time.sleep(max(0.0, next_at - time.monotonic()))

    def receive() -> None:
        while not stop.is_set():
            generation_ends = time.monotonic() + churn_every
            with ServiceBusClient.from_connection_string(broker.connection_string) as client, \
                    client.get_queue_receiver("soak", prefetch_count=100) as receiver:
                while not stop.is_set() and time.monotonic() < generation_ends:
                    for message in receiver.receive_messages(max_message_count=100, max_wait_time=1):
                        receiver.complete_message(message)
                        received[0] += 1

    threads = [threading.Thread(target=send), threading.Thread(target=receive)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    warm_up = max(60.0, seconds / 3) if warm_up is None else warm_up
    samples: list[tuple[float, int]] = []
    try:
        while time.monotonic() - started < seconds:
            time.sleep(5)
            at, rss = time.monotonic() - started, rss_kb(broker.pid)
            if at >= warm_up:
                samples.append((at, rss))
            print(f"  {at:5.0f} s  broker RSS {rss / 1024:7.1f} MB  sent {sent[0]:,}  "
                  f"received {received[0]:,}", flush=True)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    if len(samples) < 2:
        print("soak: too short to measure after the warm-up")
        return
    r0, r1 = samples[0][1], samples[-1][1]
    slope = _slope(samples)
    print(f"soak: {rate:.0f} msg/s, connections reopened every {churn_every:.0f} s, {seconds:.0f} s; "
          f"after the {warm_up:.0f} s warm-up RSS {r0 / 1024:.1f} -> {r1 / 1024:.1f} MB: {slope:+.0f} KB/min "
          f"(least squares; target < 100 KB/min); {sent[0] / (time.monotonic() - started):.0f} msg/s sent",
          flush=True)


def _slope(samples: list[tuple[float, int]]) -> float:
    """KB per minute, least-squares fit of RSS over time."""
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_r = sum(r for _, r in samples) / n
    cov = sum((t - mean_t) * (r - mean_r) for t, r in samples)
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    return cov / var * 60 if var else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--soak-seconds", type=float, default=0.0)
    parser.add_argument("--rate", type=float, default=300.0, help="messages per second in the soak")
    parser.add_argument("--churn-every", type=float, default=30.0, help="seconds between reconnections")
    parser.add_argument("--warm-up", type=float,
                        help="seconds before RSS is measured (default: the first third, at least 60 s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sbfed-churn-") as work, \
            BrokerProcess(Path(work), topology({"churn": {}, "soak": {}})) as broker:
        if args.connections:
            churn(broker, args.connections)
        if args.soak_seconds:
            soak(broker, args.soak_seconds, args.rate, args.churn_every, args.warm_up)


if __name__ == "__main__":
    main()
