"""Partitioned vs plain queue: send -> peek-lock receive -> complete throughput, in memory.

.venv/bin/python bench/partitions.py [--messages N] [--batch B]
"""

from __future__ import annotations

import argparse
import statistics

from engine import run  # bench/engine.py: the same reactor-turn loop

from local_broker.engine import FakeClock, Namespace, QueueProperties
from local_broker.store import MemoryStore

CASES = [
    ("plain queue", QueueProperties("bench"), {}),
    ("partitioned, keyless (round robin)", QueueProperties("bench", enable_partitioning=True), {}),
    (
        "partitioned, one partition key",
        QueueProperties("bench", enable_partitioning=True),
        {"partition_key": "k"},
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for label, queue, fields in CASES:
        rates = [
            run(
                Namespace.open(MemoryStore(), clock=FakeClock()), args.messages, args.batch, queue, **fields
            ).wall
            for _ in range(args.repeat)
        ]
        print(f"{label:<36} median {statistics.median(rates):>10,.0f} msg/s  best {max(rates):>10,.0f} msg/s")


if __name__ == "__main__":
    main()
