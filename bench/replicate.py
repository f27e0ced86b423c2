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

Lag target at 200 msg/s: p50 <= 20 ms and p99 <= 100 ms (printed); lag at 1,000 msg/s is printed too.
`--trace` times each step of a lag phase (bench/lag_trace.py); `--rounds 0` runs the lag phases only.

    .venv/bin/python bench/replicate.py [--messages 3000] [--rounds 3] [--lag-rate 200 ...] [--lag-seconds 10]
                                        [--trace]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import lag_trace
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from replication_harness import HOST_OPTIONS, functions_host, send_all, settings_for

from replicators.host.stats import percentile
from replicators.message import decode_application_properties
from replicators.stamps import origin_enqueued_time
from tests.broker_process import brokers

BATCH = 100
PREFETCH = 200
RECEIVE_AND_DELETE = ServiceBusReceiveMode.RECEIVE_AND_DELETE  # the replica reader only reads times
# the host runs like the raw pipe: one receiver, same prefetch and batch size
ONE_RECEIVER = dataclasses.replace(
    HOST_OPTIONS,
    prefetch_count=PREFETCH,
    max_concurrent_calls=1,
    max_message_batch_size=BATCH,
)
LAG_TARGET_RATE, LAG_TARGET_P50, LAG_TARGET_P99 = 200.0, 0.020, 0.100  # seconds
RATIO_TARGET = 0.8
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


def lag(settings: dict[str, str], rate: float, seconds: float, prefix: str) -> tuple[list[float], LagTimes]:
    """A producer at `rate` for `seconds` while the host replicates; each replica's lag (target
    EnqueuedTimeUtc minus the source's), and both enqueued times by MessageId for a trace. The producer
    and the replica reader run in a process of their own, as they would in any deployment: in the host's
    process their threads would hold the GIL while the host's woke up for each settlement."""
    with functions_host(settings, ONE_RECEIVER) as host:
        # the producer starts once the host's receiver is attached and has replicated a message
        send_all(settings["PRIMARY"], "bench", messages(1, "warm-up"))
        while host.runners[0].stats.completed == 0:
            time.sleep(0.01)
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as clients:
            return clients.submit(produce_and_read, settings, rate, seconds, prefix).result()


def produce_and_read(
    settings: dict[str, str], rate: float, seconds: float, prefix: str
) -> tuple[list[float], LagTimes]:
    total = int(rate * seconds)
    times = LagTimes({}, {}, [])

    def produce() -> None:
        with (
            ServiceBusClient.from_connection_string(settings["PRIMARY"]) as client,
            client.get_queue_sender("bench") as sender,
        ):
            pending = messages(total, prefix)
            began = time.perf_counter()  # the sender is attached: the rate counts from here
            while (sent := len(times.produced)) < total:
                # what is due by now goes in one send: one awaited send per message cannot keep 1,000
                # msg/s on a loaded machine, and a producer behind its rate would measure less load
                due = min(int((time.perf_counter() - began) * rate) + 1, total)
                batch = pending[sent : min(max(due, sent + 1), sent + BATCH)]
                sender.send_messages(batch)
                times.produced.extend([time.perf_counter() - began] * len(batch))
                delay = len(times.produced) / rate - (time.perf_counter() - began)
                if delay > 0:
                    time.sleep(delay)

    lags: list[float] = []
    with (
        ServiceBusClient.from_connection_string(settings["SECONDARY"]) as client,
        client.get_queue_receiver(
            "bench", receive_mode=RECEIVE_AND_DELETE, prefetch_count=PREFETCH
        ) as receiver,
    ):
        discard_backlog(client)
        receiver.peek_messages(1)  # attached before the first replica is due
        producer = threading.Thread(target=produce)
        producer.start()
        deadline = time.monotonic() + seconds + 60
        while len(lags) < total and time.monotonic() < deadline:
            for replica in receiver.receive_messages(max_message_count=BATCH, max_wait_time=1):
                origin = origin_enqueued_time(decode_application_properties(replica.application_properties))
                if replica.message_id.startswith(prefix + "-") and origin is not None:
                    lags.append((replica.enqueued_time_utc - origin).total_seconds())
                    times.source[replica.message_id] = origin.timestamp()
                    times.target[replica.message_id] = replica.enqueued_time_utc.timestamp()
        producer.join()
    return lags, times


def discard_backlog(client: ServiceBusClient) -> None:
    """The replicas of the throughput rounds, which nothing read: reading them during a lag phase would
    load the broker the host is measured against."""
    with client.get_queue_receiver(
        "bench", receive_mode=RECEIVE_AND_DELETE, prefetch_count=PREFETCH
    ) as backlog:
        while backlog.receive_messages(max_message_count=PREFETCH, max_wait_time=0.5):
            pass


@dataclasses.dataclass(frozen=True)
class LagTimes:
    source: dict[str, float]
    target: dict[str, float]
    produced: list[float]  # seconds from the start when each message was sent

    def producer_line(self, rate: float) -> str:
        """What the producer reached: on a loaded machine its sends fall behind the rate asked for."""
        sent = len(self.produced)
        reached = sent / self.produced[-1] if sent and self.produced[-1] > 0 else 0.0
        return f"  producer: {sent} sent at {reached:.0f} msg/s (asked {rate:.0f})"


def lag_phase(settings: dict[str, str], rate: float, seconds: float, trace: bool) -> tuple[list[float], bool]:
    """One lag phase, printed (with the trace of each step when asked); whether every message arrived."""
    prefix = f"lag{rate:.0f}"
    with lag_trace.traced() if trace else contextlib.nullcontext() as steps:
        lags, times = lag(settings, rate, seconds, prefix)
    p50, p99 = percentile(lags, 0.5) * 1000, percentile(lags, 0.99) * 1000
    print(
        f"end-to-end lag:    p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  ({len(lags)} messages at {rate:.0f} msg/s)"
        + (
            f"; target p50 <= {LAG_TARGET_P50 * 1000:.0f} ms, p99 <= {LAG_TARGET_P99 * 1000:.0f} ms: "
            + ("met" if p50 <= LAG_TARGET_P50 * 1000 and p99 <= LAG_TARGET_P99 * 1000 else "MISSED")
            if rate == LAG_TARGET_RATE
            else ""
        ),
        flush=True,
    )
    print(times.producer_line(rate), flush=True)
    if steps is not None:
        print("\n".join(steps.report(times.source, times.target)), flush=True)
    return lags, len(lags) == int(rate * seconds)


@contextlib.contextmanager
def broker_process(directory: Path) -> Iterator[dict[str, str]]:
    """`sbfed broker serve` with the bench topology; yields the app settings for both namespaces."""
    with brokers(TOPOLOGY, directory) as (namespaces, topology):
        yield settings_for(namespaces, topology)


def report_throughput(
    args: argparse.Namespace,
    raw_rates: list[float],
    replicated_rates: list[float],
    raw_cpu: list[float],
    replicated_cpu: list[float],
) -> None:
    raw_rate, replicated_rate = statistics.median(raw_rates), statistics.median(replicated_rates)
    ratio = replicated_rate / raw_rate if raw_rate else 0.0
    print(f"messages:          {args.messages} (256-byte bodies, 2 application properties, partition keys)")
    print(
        f"raw pipe:          {raw_rate:9.1f} msg/s (median of {args.rounds}), "
        f"{statistics.median(raw_cpu):.0f} us CPU per message in the client process"
    )
    print(
        f"replication:       {replicated_rate:9.1f} msg/s  ({ratio:.0%} of raw; target >= "
        f"{RATIO_TARGET:.0%}: {'met' if ratio >= RATIO_TARGET else 'MISSED'}), "
        f"{statistics.median(replicated_cpu):.0f} us CPU per message in the host process",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--lag-rate",
        type=float,
        action="append",
        help="messages per second in a lag phase (repeatable; default: 200 and 1000)",
    )
    parser.add_argument("--lag-seconds", type=float, default=10.0)
    parser.add_argument(
        "--trace",
        action="store_true",
        help="time each step of the lag phases (receive, dispatch, send, settle)",
    )
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
        if args.rounds:
            report_throughput(args, raw_rates, replicated_rates, raw_cpu, replicated_cpu)
        complete = True
        for rate in args.lag_rate or [LAG_TARGET_RATE, 1000.0]:
            complete &= lag_phase(settings, rate, args.lag_seconds, args.trace)[1]
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
