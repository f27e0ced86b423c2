"""Benchmark: messages routed per second through a topic with N subscriptions, each with one SQL filter.

A message is routed when every subscription's filter has been evaluated on it (a filter that fails
counts as a dead-letter decision, as the broker would make one). `measure` takes any
`route(message)` callable: by default the compiled filters themselves (`filter_router`); with
`--engine`, a real in-memory engine Namespace whose topic has one subscription per filter
(`engine_router`: send = evaluate every subscription's rules and enqueue the copies).

Target: 20,000 messages/s routed in memory through 100 SQL-filtered subscriptions.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from local_broker.rules import FilterEvaluationError, MessageProperties, SqlFilter, compile_filter

TARGET_MESSAGES_PER_SECOND = 20_000


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


def filter_router(filters: Sequence[SqlFilter]) -> Callable[[MessageProperties], None]:
    """Evaluate every filter on the message (as a topic decides which subscriptions get a copy)."""

    def route(message: MessageProperties) -> None:
        for sql_filter in filters:
            try:
                sql_filter.matches(message)
            except FilterEvaluationError:
                pass  # the broker dead-letters the message in that subscription

    return route


def engine_router(texts: Sequence[str]) -> Callable[[MessageProperties], None]:
    """Send through a real engine topic (in memory) with one SQL-filtered subscription per text."""
    from local_broker.engine import (
        Message,
        Namespace,
        RuleProperties,
        SubscriptionProperties,
        TopicProperties,
    )
    from local_broker.engine import SqlFilter as EngineSqlFilter

    namespace = Namespace()
    namespace.create_topic(TopicProperties("orders"))
    for number, text in enumerate(texts):
        rule = RuleProperties("filter", EngineSqlFilter(text))
        namespace.create_subscription("orders", SubscriptionProperties(f"s{number}"), rule)

    def route(message: MessageProperties) -> None:
        system = message.system_properties
        namespace.send(
            "orders",
            Message(
                b"x",
                dict(message.application_properties),
                message_id=system.get("MessageId"),
                subject=system.get("Label"),
                to=system.get("To"),
            ),
        )

    return route


@dataclass(frozen=True)
class Measurement:
    label: str
    messages: int
    seconds: float

    @property
    def messages_per_second(self) -> float:
        return self.messages / self.seconds if self.seconds else float("inf")

    def report(self) -> str:
        verdict = "meets" if self.messages_per_second >= TARGET_MESSAGES_PER_SECOND else "BELOW"
        return (
            f"{self.label}: {self.messages} messages in {self.seconds:.3f} s = "
            f"{self.messages_per_second:,.0f} messages/s routed; {verdict} the target of "
            f"{TARGET_MESSAGES_PER_SECOND:,}/s"
        )


def measure(label: str, route: Callable[[Any], Any], messages: Sequence[Any], rounds: int = 3) -> Measurement:
    """Best of `rounds` passes over `messages` (the best pass is the least disturbed by other load)."""
    best: Measurement | None = None
    for _ in range(rounds):
        started = time.perf_counter()
        for message in messages:
            route(message)
        elapsed = time.perf_counter() - started
        if best is None or elapsed < best.seconds:
            best = Measurement(label, len(messages), elapsed)
    assert best is not None
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscriptions", type=int, default=100)
    parser.add_argument("--messages", type=int, default=None, help="default: 20,000 (2,000 with --engine)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine", action="store_true", help="route through an in-memory engine topic")
    args = parser.parse_args(argv)
    count = args.messages or (2_000 if args.engine else 20_000)

    texts = typical_filters(args.subscriptions)
    started = time.perf_counter()
    filters = [compile_filter(text) for text in texts]
    print(f"compiled {len(filters)} filters in {(time.perf_counter() - started) * 1000:.1f} ms")
    messages = generated_messages(count)
    if args.engine:
        route, label = engine_router(texts), f"engine topic, {args.subscriptions} SQL-filtered subscriptions"
    else:
        route, label = filter_router(filters), f"{args.subscriptions} SQL filters"
    result = measure(label, route, messages, args.rounds)
    print(result.report())
    evaluations = result.messages * len(filters)
    nanoseconds = result.seconds / evaluations * 1e9
    print(
        f"{evaluations / result.seconds:,.0f} filter evaluations/s ({nanoseconds:.0f} ns each, all included)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
