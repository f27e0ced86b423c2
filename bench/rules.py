"""Benchmark: messages routed per second through a topic with N subscriptions, each with one SQL filter.

Two modes:
* default: the compiled filters alone; a message is routed once every filter has been evaluated on it
  (a filter that fails counts as a dead-letter decision, as the broker would make one).
* `--engine`: a real in-memory engine Namespace whose topic has one subscription per filter. A message
  is routed when `send` returned: every subscription's rules evaluated and every copy placed in its
  subscription, and the availability callback told (as the AMQP adapter registers one: it collects
  the paths that gained messages). The Message objects are built before the clock starts (decoding a
  transfer is the adapter's work); after each round the copies are counted from the subscriptions'
  runtime properties, so the copies/s figure is what really landed.

Both print messages/s by wall clock and per CPU-second (the machine is shared), copies (matches) per
second and the matches per message, so the number says how much fan-out it carried.

With `--engine`, each round then receives every copy it routed (peek-lock, 100 at a time, each batch
completed through the engine API, subscription after subscription) and prints the CPU that costs per copy
beside the routing's, and their sum: work a copy defers from routing to its first receive shows up there.

With `--engine` it also prints the memory the engine holds per subscription copy (tracemalloc), for two
body sizes: a copy is a small record of its own state pointing at the one stored payload; and the bytes
the SQLite store's file grows by per copy (one payload row per topic message, a small row per copy).

Target: 20,000 messages/s routed in memory through 100 SQL-filtered subscriptions (per CPU-second).
"""

from __future__ import annotations

import argparse
import gc
import random
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_broker.rules import FilterEvaluationError, MessageProperties, compile_filter

TARGET_MESSAGES_PER_SECOND = 20_000
TOPIC = "orders"


def typical_filters(count: int) -> list[str]:
    """Filters of the shapes seen in practice: equality and range, LIKE prefix, IS NULL, IN, arithmetic/OR."""
    shapes: list[Callable[[int], str]] = [
        lambda i: f"region = 'r{i % 20}' AND priority > {i % 7}",
        lambda i: f"sys.Label LIKE 'order{i % 10}%'",
        lambda i: "replication IS NULL" if i % 2 else f"user.Tenant{i % 3} IS NOT NULL",
        lambda i: f"customer IN ('c{i}', 'c{i + 1}', 'c{i + 2}')",
        lambda i: f"amount * 2 >= {i * 10} OR sys.To = 'store{i % 8}'",
    ]
    return [shapes[i % len(shapes)](i) for i in range(count)]


def generated_messages(count: int, seed: int = 7) -> list[MessageProperties]:
    """Messages with a handful of typed user properties and the common system properties."""
    rng = random.Random(seed)
    messages = []
    for n in range(count):
        properties: dict[str, Any] = {
            "Region": f"r{rng.randrange(20)}",
            "priority": rng.randrange(10),
            "customer": f"c{rng.randrange(120)}",
            "amount": rng.random() * 1000,
            "source": "orders-api",
        }
        if rng.random() < 0.3:
            properties["replication"] = "eu-west"
        system = {
            "Label": f"order{rng.randrange(12)}-created",
            "To": f"store{rng.randrange(10)}",
            "MessageId": str(n),
        }
        messages.append(MessageProperties(properties, system))
    return messages


@dataclass(frozen=True)
class Round:
    seconds: float  # wall clock
    cpu_seconds: float  # this process's CPU time
    copies: int  # subscription copies made (matches, plus dead-letter decisions)
    receive_cpu_seconds: float = 0.0  # receiving and completing every copy afterwards (--engine)


def filter_round(texts: Sequence[str], messages: Sequence[MessageProperties]) -> Round:
    """Evaluate every filter on every message (as a topic decides which subscriptions get a copy)."""
    filters = [compile_filter(text).matches for text in texts]
    copies = 0
    started, cpu_started = time.perf_counter(), time.process_time()
    for message in messages:
        for matches in filters:
            try:
                if matches(message):
                    copies += 1
            except FilterEvaluationError:
                copies += 1  # the broker dead-letters the message in that subscription
    return Round(time.perf_counter() - started, time.process_time() - cpu_started, copies)


def engine_topic(texts: Sequence[str], ready_paths: set[str], store: Any = None) -> Any:
    """A fresh namespace (in memory, or in `store`) whose topic has one SQL-filtered subscription per text."""
    from local_broker.engine import (
        FakeClock,
        Namespace,
        RuleProperties,
        SqlFilter,
        SubscriptionProperties,
        TopicProperties,
    )

    namespace = Namespace(clock=FakeClock()) if store is None else Namespace.open(store, clock=FakeClock())
    namespace.on_available(ready_paths.add)
    namespace.create_topic(TopicProperties(TOPIC))
    for number, text in enumerate(texts):
        rule = RuleProperties("filter", SqlFilter(text))
        namespace.create_subscription(TOPIC, SubscriptionProperties(f"s{number}"), rule)
    return namespace


def engine_messages(messages: Sequence[MessageProperties], body: bytes = b"x") -> list[Any]:
    from local_broker.engine import Message

    return [
        Message(
            body,
            dict(message.application_properties),
            message_id=message.system_properties.get("MessageId"),
            subject=message.system_properties.get("Label"),
            to=message.system_properties.get("To"),
        )
        for message in messages
    ]


def copy_count(namespace: Any, subscriptions: int) -> int:
    runtimes = [namespace.get_subscription_runtime_properties(TOPIC, f"s{n}") for n in range(subscriptions)]
    return sum(r.active_message_count + r.dead_letter_message_count for r in runtimes)


def bytes_per_copy(texts: Sequence[str], messages: Sequence[MessageProperties], body_size: int) -> float:
    """Memory the engine holds per subscription copy once the messages are in (their bodies and
    properties were allocated before, by the decoder), measured with tracemalloc."""
    namespace = engine_topic(texts, set())
    batch = engine_messages(messages, b"x" * body_size)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for message in batch:
        namespace.send(TOPIC, message)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held / copy_count(namespace, len(texts))


def file_bytes(path: Path) -> int:
    """The bytes a SQLite file's pages hold (free pages left out), its write-ahead log folded in."""
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pragmas = ("page_count", "freelist_count", "page_size")
        used, free, size = (db.execute(f"PRAGMA {name}").fetchone()[0] for name in pragmas)
        return (used - free) * size
    finally:
        db.close()


def stored_bytes_per_copy(texts: Sequence[str], messages: Sequence[Any], body_size: int) -> float:
    """What the SQLite store's file grows by per subscription copy once the messages are committed."""
    from local_broker.engine import Namespace  # noqa: F401  (the engine first: its store imports it)
    from local_broker.store import SqliteStore

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "namespace.db"
        namespace = engine_topic(texts, set(), SqliteStore(path, synchronous="NORMAL", reserve_bytes=0))
        namespace.commit()
        before = file_bytes(path)
        for message in engine_messages(messages, b"x" * body_size):
            namespace.send(TOPIC, message)
        namespace.commit()
        copies = copy_count(namespace, len(texts))
        namespace.close()
        return (file_bytes(path) - before) / copies


def engine_round(texts: Sequence[str], messages: Sequence[MessageProperties]) -> Round:
    """Send every message to a fresh in-memory engine topic with one SQL-filtered subscription per text,
    then receive and complete every copy."""
    ready_paths: set[str] = set()
    namespace = engine_topic(texts, ready_paths)
    batch = engine_messages(messages)
    send = namespace.send
    started, cpu_started = time.perf_counter(), time.process_time()
    for message in batch:
        send(TOPIC, message)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    for number in range(len(texts)):
        runtime = namespace.get_subscription_runtime_properties(TOPIC, f"s{number}")
        if runtime.active_message_count and f"{TOPIC}/Subscriptions/s{number}" not in ready_paths:
            raise AssertionError(f"subscription s{number} got messages but no availability callback")
    copies = copy_count(namespace, len(texts))
    return Round(seconds, cpu_seconds, copies, receive_all(namespace, len(texts), copies))


def receive_all(namespace: Any, subscriptions: int, copies: int) -> float:
    """CPU-seconds to receive (peek-lock, batches of 100) and complete every copy in every subscription."""
    receive, complete = namespace.receive, namespace.complete
    paths = [f"{TOPIC}/Subscriptions/s{number}" for number in range(subscriptions)]
    received = 0
    cpu_started = time.process_time()
    for path in paths:
        while batch := receive(path, 100):
            complete(path, [m.lock_token for m in batch])
            received += len(batch)
    cpu_seconds = time.process_time() - cpu_started
    if received != copies or copy_count(namespace, subscriptions):
        raise AssertionError(f"received {received} of {copies} copies")
    return cpu_seconds


@dataclass(frozen=True)
class Measurement:
    label: str
    messages: int
    rounds: list[Round]

    @property
    def best_wall(self) -> float:
        return self.messages / min(r.seconds for r in self.rounds)

    @property
    def best_cpu(self) -> float:
        return self.messages / min(r.cpu_seconds for r in self.rounds)

    def report(self) -> str:
        copies = self.rounds[0].copies
        verdict = "meets" if self.best_cpu >= TARGET_MESSAGES_PER_SECOND else "BELOW"
        return (
            f"{self.label}: {self.messages} messages, {copies / self.messages:.1f} matched subscriptions "
            f"per message\n"
            f"  {self.best_wall:>9,.0f} messages/s routed (wall, best of {len(self.rounds)})\n"
            f"  {self.best_cpu:>9,.0f} messages/s routed per CPU-second; {verdict} the target of "
            f"{TARGET_MESSAGES_PER_SECOND:,}/s\n"
            f"  {self.best_cpu * copies / self.messages:>9,.0f} copies/s per CPU-second"
            + (self.receive_report() if self.rounds[0].receive_cpu_seconds else "")
        )

    def receive_report(self) -> str:
        copies = self.rounds[0].copies
        route = min(r.cpu_seconds for r in self.rounds) / copies * 1e6
        receive = min(r.receive_cpu_seconds for r in self.rounds) / copies * 1e6
        return (
            f"\n  {route:9.2f} us CPU per copy routing (the message's share of the selector included)"
            f"\n  {receive:9.2f} us CPU per copy receiving it (peek-lock, 100 a batch) and completing it"
            f"\n  {route + receive:9.2f} us CPU per copy in all (best rounds of each)"
        )


def measure(
    label: str,
    run: Callable[[Sequence[str], Sequence[Any]], Round],
    texts: Sequence[str],
    messages: Sequence[Any],
    rounds: int,
) -> Measurement:
    """`rounds` independent rounds (each builds its own filters or namespace, untimed)."""
    results = [run(texts, messages) for _ in range(rounds)]
    if len({r.copies for r in results}) != 1:
        raise AssertionError(f"rounds routed different copy counts: {[r.copies for r in results]}")
    return Measurement(label, len(messages), results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscriptions", type=int, default=100)
    parser.add_argument("--messages", type=int, default=None, help="default: 20,000 (5,000 with --engine)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine", action="store_true", help="route through an in-memory engine topic")
    args = parser.parse_args(argv)
    count = args.messages or (5_000 if args.engine else 20_000)

    texts = typical_filters(args.subscriptions)
    started = time.perf_counter()
    for text in texts:
        compile_filter(text)
    print(f"compiled {len(texts)} filters in {(time.perf_counter() - started) * 1000:.1f} ms")
    messages = generated_messages(count)
    if args.engine:
        label, run = f"engine topic, {args.subscriptions} SQL-filtered subscriptions", engine_round
    else:
        label, run = f"{args.subscriptions} SQL filters alone", filter_round
    result = measure(label, run, texts, messages, args.rounds)
    print(result.report())
    print(f"  {result.best_cpu * len(texts):>9,.0f} filter evaluations per CPU-second")
    if args.engine:
        # What a server process does once it has started (docs/engine-api.md section 10).
        gc.freeze()
        gc.set_threshold(100_000, 50, 100)
        print(measure(label + ", GC tuned", run, texts, messages, args.rounds).report())
        for body_size in (16, 4096):
            held = bytes_per_copy(texts, messages[:2000], body_size)
            print(
                f"  {held:9,.0f} bytes held per subscription copy ({body_size:,}-byte bodies: "
                "the payload is stored once per topic message)"
            )
        for body_size in (16, 4096):
            stored = stored_bytes_per_copy(texts, messages[:1000], body_size)
            print(f"  {stored:9,.0f} bytes stored per copy in SQLite ({body_size:,}-byte bodies)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
