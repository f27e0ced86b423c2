"""Replication throughput and end-to-end lag between two local namespaces, next to the raw pipe rate.

The broker runs as its own process (`sbfed broker serve`), as it would for any client; the raw pipe and
the Functions host run in this process. Phases (same receive/send shape each time: one receiver,
prefetch 200, batches of 100, peek-lock, complete after the send), raw and replication alternated for
`--rounds` rounds on a shared machine, medians reported:
  raw pipe    - the SDK receiving from the source and sending the received messages to the target as they
                are (SDK-side copy of every section), no replicator logic;
  replication - function_app.py run by the local Functions host over the same backlog;
  lag         - a producer at a steady rate while the host replicates: target EnqueuedTimeUtc minus the
                source's (the `repl-enqueued-time` stamp), p50/p99.
Target: replication at 80 % or more of the raw pipe rate (printed; exit status 1 only when a lag-phase
message never reached the target).

    .venv/bin/python bench/replicate.py [--messages 3000] [--rounds 3] [--lag-rate 200] [--lag-seconds 10]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from replication_harness import HOST_OPTIONS, functions_host, send_all, settings_for

from replicators.host.stats import percentile
from replicators.message import decode_application_properties
from replicators.stamps import origin_enqueued_time
from tests.broker_process import brokers

BATCH = 100
PREFETCH = 200
# the host runs like the raw pipe: one receiver, same prefetch and batch size
ONE_RECEIVER = dataclasses.replace(
    HOST_OPTIONS,
    prefetch_count=PREFETCH,
    max_concurrent_calls=1,
    max_message_batch_size=BATCH,
    max_batch_wait_time=dt.timedelta(milliseconds=200),
)
TARGET = {"requires_duplicate_detection": True, "duplicate_detection_history_time_window": "PT10M"}
TOPOLOGY = {
    "namespaces": {
        "primary": {"queues": {"raw": {}, "bench": {}}},
        "secondary": {"queues": {"raw": dict(TARGET), "bench": dict(TARGET)}},
    },
    "connections": {"PRIMARY": "primary", "SECONDARY": "secondary"},
    "tasks": [
        {
            "name": "bench-to-secondary",
            "source": {"connection": "PRIMARY", "queue": "bench"},
            "target": {"connection": "SECONDARY", "queue": "bench"},
            "options": {"batch_size": BATCH, "concurrency": 1},
        }
    ],
}


def messages(count: int, prefix: str) -> list[ServiceBusMessage]:
    return [
        ServiceBusMessage(
            b"x" * 256,
            message_id=f"{prefix}-{i}",
            partition_key=f"k{i % 16}",
            application_properties={"i": i, "tenant": "contoso"},
        )
        for i in range(count)
    ]


def raw_pipe(source: str, target: str, count: int) -> float:
    """Messages per second for receive -> send the same messages -> complete, with nothing else."""
    moved = 0
    with (
        ServiceBusClient.from_connection_string(source) as src,
        ServiceBusClient.from_connection_string(target) as dst,
        src.get_queue_receiver("raw", prefetch_count=PREFETCH) as receiver,
        dst.get_queue_sender("raw") as sender,
    ):
        started = time.perf_counter()
        while moved < count:
            batch = receiver.receive_messages(max_message_count=BATCH, max_wait_time=1)
            if not batch:
                continue
            sender.send_messages(
                [ServiceBusMessage(b"".join(m.body), message_id=m.message_id) for m in batch]
            )
            for message in batch:
                receiver.complete_message(message)
            moved += len(batch)
        return moved / (time.perf_counter() - started)


def replication(settings: dict[str, str], count: int) -> float:
    with functions_host(settings, ONE_RECEIVER) as host:
        stats = host.runners[0].stats
        while stats.completed == 0:
            time.sleep(0.01)
        started, first = time.perf_counter(), stats.completed
        while stats.completed < count:
            time.sleep(0.01)
        return (stats.completed - first) / (time.perf_counter() - started)


def lag(settings: dict[str, str], rate: float, seconds: float) -> list[float]:
    total = int(rate * seconds)

    def produce() -> None:
        with (
            ServiceBusClient.from_connection_string(settings["PRIMARY"]) as client,
            client.get_queue_sender("bench") as sender,
        ):
            for i, message in enumerate(messages(total, "lag")):
                sender.send_messages(message)
                delay = (i + 1) / rate - (time.perf_counter() - began)
                if delay > 0:
                    time.sleep(delay)

    lags: list[float] = []
    with functions_host(settings, ONE_RECEIVER):
        began = time.perf_counter()
        producer = threading.Thread(target=produce)
        producer.start()
        with (
            ServiceBusClient.from_connection_string(settings["SECONDARY"]) as client,
            client.get_queue_receiver("bench", prefetch_count=PREFETCH) as receiver,
        ):
            deadline = time.monotonic() + seconds + 60
            while len(lags) < total and time.monotonic() < deadline:
                for replica in receiver.receive_messages(max_message_count=BATCH, max_wait_time=1):
                    origin = origin_enqueued_time(
                        decode_application_properties(replica.application_properties)
                    )
                    if replica.message_id.startswith("lag-") and origin is not None:
                        lags.append((replica.enqueued_time_utc - origin).total_seconds())
                    receiver.complete_message(replica)
        producer.join()
    return lags


@contextlib.contextmanager
def broker_process(directory: Path) -> Iterator[dict[str, str]]:
    """`sbfed broker serve` with the bench topology; yields the app settings for both namespaces."""
    with brokers(TOPOLOGY, directory) as (namespaces, topology):
        yield settings_for(namespaces, topology)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lag-rate", type=float, default=200.0, help="messages per second in the lag phase")
    parser.add_argument("--lag-seconds", type=float, default=10.0)
    args = parser.parse_args()
    raw_rates, replicated_rates, raw_cpu, replicated_cpu = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp, broker_process(Path(tmp)) as settings:
        for round_number in range(args.rounds):
            send_all(settings["PRIMARY"], "raw", messages(args.messages, f"raw{round_number}"))
            send_all(settings["PRIMARY"], "bench", messages(args.messages, f"rep{round_number}"))
            cpu = time.process_time()
            raw_rates.append(raw_pipe(settings["PRIMARY"], settings["SECONDARY"], args.messages))
            raw_cpu.append((time.process_time() - cpu) / args.messages * 1e6)
            cpu = time.process_time()
            replicated_rates.append(replication(settings, args.messages))
            replicated_cpu.append((time.process_time() - cpu) / args.messages * 1e6)
            print(
                f"round {round_number + 1}: raw {raw_rates[-1]:.1f} msg/s, replication "
                f"{replicated_rates[-1]:.1f} msg/s",
                flush=True,
            )
        lags = lag(settings, args.lag_rate, args.lag_seconds)
    raw_rate, replicated_rate = statistics.median(raw_rates), statistics.median(replicated_rates)
    ratio = replicated_rate / raw_rate if raw_rate else 0.0
    print(f"messages:          {args.messages} (256-byte bodies, 2 application properties, partition keys)")
    print(
        f"raw pipe:          {raw_rate:9.1f} msg/s (median of {args.rounds}), "
        f"{statistics.median(raw_cpu):.0f} us CPU per message in the client process"
    )
    print(
        f"replication:       {replicated_rate:9.1f} msg/s  ({ratio:.0%} of raw; target >= 80%), "
        f"{statistics.median(replicated_cpu):.0f} us CPU per message in the host process"
    )
    print(
        f"end-to-end lag:    p50 {percentile(lags, 0.5) * 1000:.1f} ms  "
        f"p99 {percentile(lags, 0.99) * 1000:.1f} ms"
        f"  ({len(lags)} messages at {args.lag_rate:.0f} msg/s)"
    )
    return 0 if len(lags) == int(args.lag_rate * args.lag_seconds) else 1


if __name__ == "__main__":
    sys.exit(main())
