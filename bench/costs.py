"""Cost guard: instructions per operation of the broker's hot paths, counted by valgrind's callgrind.

    python bench/costs.py [--repeat N] [--only FIGURE ...] [--json] [--keep DIR]
    python bench/costs.py --update-baseline --why "what moved the figures and why that is right"

Instruction counts do not depend on the machine's load, so unlike the other benches' rates they can guard
against regressions: tests/bench/test_costs.py fails when a figure rises more than 10 % over
bench/costs-baseline.json, and the baseline moves only by `--update-baseline` in a commit that says why.

How a figure is counted: the workloads run in one Python process under callgrind with `--dump-before=getppid`;
each one is set up and warmed (so first-call costs and caches are not in it), then `os.getppid()` marks the
start and the end of its measured operations, and the counts between the two marks are divided by the number
of operations. Start-up, imports and warm-up fall outside every mark, so nothing fixed needs subtracting.
The garbage collector runs as in bench/engine.py (the interpreter's defaults), its cost per operation
included. The SDK figures count the broker process alone: it runs under callgrind with the same marks, set by
SIGUSR1 from this process, which drives it with the azure-servicebus SDK at native speed.

Counts depend on the interpreter's build: the baseline records it, and the guard fails on another one.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "bench" / "costs-baseline.json"
TOLERANCE = 0.10  # a rise above this fails tests/bench/test_costs.py
BODY = b"x" * 1024
BATCH = 100  # messages per engine turn, as bench/engine.py
# figure -> what one operation is
FIGURES = {
    "engine.memory": "one 1 KB message sent, peek-lock received and completed (in-memory store, batches "
                     "of 100)",
    "engine.sqlite": "the same through the SQLite store (WAL, synchronous=NORMAL)",
    "topic.copy": "one subscription copy, routed by a topic of 10 SQL-filtered subscriptions",
    "amqp.decode": "one SDK-encoded transfer (1 KB body, 3 application properties, a partition key) decoded "
                   "into a Message",
    "amqp.encode": "one received message encoded for delivery (with its lock)",
    "amqp.decode.python": "amqp.decode by the pure-Python codec (SBFED_PURE_PYTHON=1, or no C compiler at "
                          "install)",
    "amqp.encode.python": "amqp.encode by the pure-Python codec",
    "broker.sdk_send": "broker process: one ServiceBusSender.send_messages of one 1 KB message",
    "broker.sdk_receive_complete": "broker process: one receive_messages(max_message_count=1) + complete",
    "broker.lean_send": "broker process: one 1 KB durable message sent by bench/amqp_client.py (the lean "
                        "client bench/amqp_compare.py compares the peers with; 1,000 awaiting their outcome)",
}
IN_PROCESS = ("engine.memory", "engine.sqlite", "topic.copy", "amqp.decode", "amqp.encode",
              "amqp.decode.python", "amqp.encode.python")
BROKER = ("broker.sdk_send", "broker.sdk_receive_complete", "broker.lean_send")
LEAN_CLIENT = ROOT / "bench" / "amqp_client.py"


def mark() -> None:
    """Callgrind dumps its counts here (`--dump-before=getppid`); nothing else in the process calls it."""
    os.getppid()


# --- the in-process workloads: each yields once set up and warmed, then the operations it measured --------

Workload = Callable[[int], Iterator[int]]


def _engine_turns(ns: Any, messages: int) -> None:
    """bench/engine.py's turn: send batch k, receive batch k-1, complete batch k-2, then commit."""
    from local_broker.engine import Message, ReceiveMode

    received: list[Any] = []
    turns = messages // BATCH
    for turn in range(turns + 2):
        if received:
            ns.complete("costs", [m.lock_token for m in received])
        received = ns.receive("costs", BATCH, ReceiveMode.PEEK_LOCK) if turn >= 1 else []
        if turn < turns:
            ns.send("costs", [Message(BODY, message_id=str(turn * BATCH + i)) for i in range(BATCH)])
        ns.commit()


def _engine(store: Any, messages: int) -> Iterator[int]:
    from local_broker.engine import FakeClock, Namespace, QueueProperties

    ns = Namespace.open(store, clock=FakeClock())
    ns.create_queue(QueueProperties("costs"))
    ns.commit()
    _engine_turns(ns, 1000)
    yield 0
    _engine_turns(ns, messages)
    yield messages
    assert ns.get_queue_runtime_properties("costs").total_message_count == 0
    ns.close()


def engine_memory(scale: int) -> Iterator[int]:
    from local_broker.store import MemoryStore

    yield from _engine(MemoryStore(), BATCH * max(1, scale // 5))


def engine_sqlite(scale: int) -> Iterator[int]:
    from local_broker.store import SqliteStore

    with tempfile.TemporaryDirectory(prefix="sbfed-costs-") as tmp:
        store = SqliteStore(Path(tmp) / "costs.db", synchronous="NORMAL")
        yield from _engine(store, BATCH * max(1, scale // 20))


def topic_copy(scale: int) -> Iterator[int]:
    sys.path.insert(0, str(ROOT / "bench"))
    import rules  # bench/rules.py: its typical filters and messages, so both benches route the same traffic

    subscriptions = 10
    ready: set[str] = set()
    ns = rules.engine_topic(rules.typical_filters(subscriptions), ready)
    count = 2 * scale
    messages = rules.engine_messages(rules.generated_messages(count + 200), BODY)

    def route(chunk: list[Any]) -> None:
        for start in range(0, len(chunk), BATCH):
            ns.send(rules.TOPIC, chunk[start:start + BATCH])
            ns.commit()

    route(messages[:200])  # past the selector's interpreted warm-up
    before = rules.copy_count(ns, subscriptions)
    yield 0
    route(messages[200:])
    yield rules.copy_count(ns, subscriptions) - before


def _sdk_transfer() -> bytes:
    """A transfer's payload as the Python SDK encodes a message (proton's encoder, the same sections)."""
    import uuid

    from proton import Message as ProtonMessage

    message = ProtonMessage(body=BODY, id=str(uuid.UUID(int=7)), subject="order-created", inferred=True,
                            properties={"region": "eu-west", "priority": 3, "amount": 12.5}, durable=True)
    message.annotations = {"x-opt-partition-key": "p7"}
    return message.encode()


def amqp_decode(scale: int) -> Iterator[int]:
    from local_broker.wire.amqp.messages import decode_transfer

    payload = _sdk_transfer()
    for _ in range(200):
        decode_transfer(payload)
    yield 0
    for _ in range(5 * scale):
        decode_transfer(payload)
    yield 5 * scale


def amqp_encode(scale: int) -> Iterator[int]:
    from local_broker.engine import FakeClock, Namespace, QueueProperties, ReceiveMode
    from local_broker.wire.amqp.messages import decode_transfer, encode_message

    ns = Namespace(clock=FakeClock())
    ns.create_queue(QueueProperties("costs"))
    ns.send("costs", decode_transfer(_sdk_transfer()))
    (message,) = ns.receive("costs", 1, ReceiveMode.PEEK_LOCK)
    for _ in range(200):
        encode_message(message, with_lock=True)
    yield 0
    for _ in range(5 * scale):
        encode_message(message, with_lock=True)
    yield 5 * scale


def pure_python(workload: Workload) -> Workload:
    """`workload` with the AMQP values codec's C module switched off (values.py's reference code)."""

    def run(scale: int) -> Iterator[int]:
        from local_broker.wire.amqp import values

        saved, values._native = values._native, None
        try:
            yield from workload(scale)
        finally:
            values._native = saved

    return run


WORKLOADS: dict[str, Workload] = {
    "engine.memory": engine_memory, "engine.sqlite": engine_sqlite, "topic.copy": topic_copy,
    "amqp.decode": amqp_decode, "amqp.encode": amqp_encode,
    "amqp.decode.python": pure_python(amqp_decode), "amqp.encode.python": pure_python(amqp_encode),
}


def run_workloads(names: list[str], scale: int) -> None:
    """Child mode (under callgrind): each workload between two marks; prints [[name, operations], ...]."""
    # everything imported before any mark, whichever workload runs first
    import local_broker.engine
    import local_broker.store
    import local_broker.wire.amqp.messages  # noqa: F401

    done = []
    for name in names:
        steps = WORKLOADS[name](scale)
        next(steps)
        gc.collect()
        mark()
        operations = next(steps)
        mark()
        for _ in steps:  # its clean-up
            pass
        done.append([name, operations])
    print(json.dumps(done))


# --- the broker process ---------------------------------------------------------------------------------

def serve_marked(argv: list[str]) -> int:
    """Broker mode (under callgrind): `sbfed broker serve`; SIGUSR1 marks, then acknowledges in a file.

    The signal is taken by a thread of its own (sigwait, the signal blocked in every other thread): a
    Python handler would run only once the main thread, asleep until SIGTERM, woke up."""
    ack = Path(os.environ["SBFED_COSTS_ACK"])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # inherited by every thread started later

    def take_marks() -> None:
        marks = 0
        while True:
            signal.sigwait({signal.SIGUSR1})
            mark()
            marks += 1
            ack.write_text(str(marks))

    threading.Thread(target=take_marks, name="costs-marks", daemon=True).start()
    from local_broker.cli import main

    return main(["serve", *argv])


class MarkedBroker:
    """`sbfed broker serve` under callgrind; `mark()` dumps its counts and waits until it has."""

    TOPOLOGY = "namespaces:\n  costs:\n    queues:\n      costs: {}\n"

    def __init__(self, workdir: Path, command: list[str]) -> None:
        (workdir / "topology.yaml").write_text(self.TOPOLOGY)
        self.ack, ready = workdir / "ack", workdir / "ready.json"
        serve = ["--topology", str(workdir / "topology.yaml"), "--data", str(workdir / "data"),
                 "--amqp-port", "0", "--admin-port", "0", "--ready-file", str(ready),
                 "--log-level", "WARNING"]
        env = {**os.environ, "SBFED_COSTS_ACK": str(self.ack), "PYTHONHASHSEED": "0"}
        self.proc = subprocess.Popen([*command, sys.executable, __file__, "--broker", *serve], cwd=ROOT,
                                     env=env, stdout=subprocess.DEVNULL)
        self.marks = 0
        deadline = time.monotonic() + 600
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the broker under callgrind did not start")
            time.sleep(0.2)
        self.namespace = json.loads(ready.read_text())[0]

    def mark(self) -> None:
        self.marks += 1
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 120
        while not (self.ack.exists() and self.ack.read_text() == str(self.marks)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the broker under callgrind did not mark")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(300)


def drive_broker(broker: MarkedBroker, scale: int) -> list[list[Any]]:
    """The SDK's turns against the marked broker; [[name, operations], ...] in mark order."""
    from azure.servicebus import ServiceBusClient, ServiceBusMessage

    sends = scale // 2
    with ServiceBusClient.from_connection_string(broker.namespace["connection_string"]) as client:
        with client.get_queue_sender("costs") as sender:
            for _ in range(50 + sends):  # a warm-up's worth, then the messages the receive phase takes
                sender.send_messages(ServiceBusMessage(BODY))
            broker.mark()
            for _ in range(sends):
                sender.send_messages(ServiceBusMessage(BODY))
            broker.mark()
        with client.get_queue_receiver("costs", max_wait_time=120) as receiver:
            for turn in range(50 + 2 * sends):
                if turn == 50:
                    broker.mark()
                (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=120)
                receiver.complete_message(message)
            broker.mark()
    lean = 10 * scale
    lean_send(broker, lean)  # a warm-up's worth, its own connection
    broker.mark()
    lean_send(broker, lean)
    broker.mark()
    return [["broker.sdk_send", sends], ["broker.sdk_receive_complete", 2 * sends],
            ["broker.lean_send", lean]]


def lean_send(broker: MarkedBroker, messages: int) -> None:
    """bench/amqp_client.py sends `messages` on a connection of its own (its opening and closing, a few
    thousand instructions per message at the default 1,000, are in the figure)."""
    fields = dict(part.split("=", 1) for part in broker.namespace["connection_string"].split(";") if part)
    url = f"amqp://127.0.0.1:{broker.namespace['amqp_port']}"
    subprocess.run([sys.executable, str(LEAN_CLIENT), "send", "--url", url, "--address", "costs",
                    "--user", fields["SharedAccessKeyName"], "--password", fields["SharedAccessKey"],
                    "-n", str(messages), "--timeout", "600"], check=True, stdout=subprocess.DEVNULL)


# --- counting -------------------------------------------------------------------------------------------

def callgrind_command(out: Path) -> list[str]:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed: `make setup` (scripts/ensure-valgrind.sh) installs it")
    return [valgrind, "--tool=callgrind", "--dump-before=getppid", f"--callgrind-out-file={out}"]


def dumped_counts(out: Path) -> list[int]:
    """Instructions in each dump callgrind wrote at a mark, in order (out.1: what came before the first)."""
    counts = []
    for number in range(1, 10_000):
        dump = Path(f"{out}.{number}")
        if not dump.exists():
            break
        found = re.search(r"^(?:totals|summary): (\d+)", dump.read_text(errors="replace"), re.M)
        counts.append(int(found.group(1)) if found else 0)
    return counts


def per_operation(done: list[list[Any]], counts: list[int]) -> dict[str, float]:
    """The dump at a workload's end mark holds its operations' counts (start and end marks alternate)."""
    if len(counts) < 2 * len(done):
        raise SystemExit(f"callgrind wrote {len(counts)} dumps for {len(done)} workloads: is getppid marked? "
                         "(a python without symbols for libc?)")
    return {name: counts[2 * i + 1] / operations for i, (name, operations) in enumerate(done)}


def kept(out: Path, keep: Path | None, prefix: str) -> None:
    """Copies callgrind's dumps to `keep` (for callgrind_annotate); the dump after a workload's start mark
    (`<prefix>.N`, N even) is that workload's measured operations."""
    if keep is None:
        return
    keep.mkdir(parents=True, exist_ok=True)
    for dump in out.parent.glob(f"{out.name}.*"):
        shutil.copy(dump, keep / dump.name.replace(out.name, prefix, 1))


def measure_in_process(names: list[str], scale: int, keep: Path | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="sbfed-costs-") as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run([*callgrind_command(out), sys.executable, __file__, "--workloads", *names,
                               "--scale", str(scale)], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": "0"})
        if done.returncode != 0:
            raise SystemExit(f"the workloads failed under callgrind:\n{done.stdout}{done.stderr[-4000:]}")
        kept(out, keep, "in-process")
        return per_operation(json.loads(done.stdout.strip().splitlines()[-1]), dumped_counts(out))


def measure_broker(scale: int, keep: Path | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="sbfed-costs-") as tmp:
        out = Path(tmp) / "callgrind.out"
        broker = MarkedBroker(Path(tmp), callgrind_command(out))
        try:
            done = drive_broker(broker, scale)
        finally:
            broker.stop()
        kept(out, keep, "broker")
        return per_operation(done, dumped_counts(out))


def measure(names: list[str], scale: int, keep: Path | None = None) -> dict[str, float]:
    figures: dict[str, float] = {}
    inside = [name for name in names if name in IN_PROCESS]
    if inside:
        figures.update(measure_in_process(inside, scale, keep))
    if any(name in BROKER for name in names):
        figures.update({k: v for k, v in measure_broker(scale, keep).items() if k in names})
    return {name: round(figures[name]) for name in names}


def interpreter() -> str:
    """What the counts depend on besides the code: the interpreter's build and the machine's architecture."""
    return f"{platform.python_implementation()} {platform.python_version()} {platform.machine()} " \
           f"({platform.python_compiler()}, {platform.libc_ver()[0]} {platform.libc_ver()[1]})"


def codec() -> str:
    """Which AMQP values codec the figures count (all but the *.python ones): the C module where it was built
    (what users run), else the pure-Python one."""
    from local_broker.wire.amqp import values

    return "C (local_broker.wire.amqp._speedups)" if values._native is not None else "pure Python"


def load_baseline() -> dict[str, Any]:
    return json.loads(BASELINE.read_text())


def compare(figures: dict[str, float], baseline: dict[str, Any]) -> list[str]:
    """Every figure more than TOLERANCE above its baseline, as a sentence naming both."""
    rises = []
    for name, value in figures.items():
        base = baseline["figures"][name]["instructions"]
        if value > base * (1 + TOLERANCE):
            rises.append(f"{name}: {value:,.0f} instructions per operation, {value / base - 1:+.1%} over the "
                         f"baseline's {base:,.0f} ({BASELINE.name}, commit {baseline['commit']})")
    return rises


def update_baseline(figures: dict[str, float], why: str) -> None:
    # the commit measured; "-dirty" when uncommitted changes were measured with it
    commit = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    old = load_baseline() if BASELINE.exists() else {"figures": {}, "history": []}
    entry = {"commit": commit, "interpreter": interpreter(), "codec": codec(), "why": why,
             "moved": {name: [old["figures"].get(name, {}).get("instructions"), value]
                       for name, value in figures.items()}}
    baseline = {
        "about": "instructions per operation under callgrind (bench/costs.py); moved only by "
                 "`bench/costs.py --update-baseline --why ...` in a commit that says why",
        "commit": commit, "interpreter": interpreter(), "codec": codec(),
        "figures": {**old["figures"], **{name: {"instructions": value, "operation": FIGURES[name]}
                                         for name, value in figures.items()}},
        "history": [*old["history"], entry],
    }
    BASELINE.write_text(json.dumps(baseline, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--broker"]:
        return serve_marked(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=list(FIGURES), default=list(FIGURES))
    parser.add_argument("--repeat", type=int, default=1, help="measure N times and print the spread")
    parser.add_argument("--scale", type=int, default=100, help="operations per workload, in hundreds")
    parser.add_argument("--json", action="store_true", help="the figures as one JSON line at the end")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep callgrind's dumps in DIR (broker.N, in-process.N; read them with "
                             "callgrind_annotate)")
    parser.add_argument("--update-baseline", action="store_true")
    parser.add_argument("--why", help="with --update-baseline: what moved the figures, recorded in the file")
    parser.add_argument("--workloads", nargs="+", help=argparse.SUPPRESS)  # child mode, under callgrind
    args = parser.parse_args(argv)
    if args.workloads:
        run_workloads(args.workloads, args.scale)
        return 0
    if args.update_baseline and not args.why:
        parser.error("--update-baseline needs --why: the baseline moves only with a reason")
    runs = [measure(args.only, args.scale, args.keep) for _ in range(args.repeat)]
    baseline = load_baseline() if BASELINE.exists() else None
    print(f"instructions per operation (callgrind), {interpreter()}, {codec()} AMQP codec")
    for name in args.only:
        values = [run[name] for run in runs]
        middle = statistics.median(values)
        spread = (f"  spread {(max(values) - min(values)) / middle:.2%} over {len(values)}"
                  if len(values) > 1 else "")
        base = baseline["figures"].get(name, {}).get("instructions") if baseline else None
        versus = f"  baseline {base:>10,.0f} ({middle / base - 1:+.1%})" if base else ""
        print(f"{name:<28} {middle:>10,.0f}{versus}{spread}   {FIGURES[name]}")
    figures = {name: statistics.median(run[name] for run in runs) for name in args.only}
    if args.update_baseline:
        update_baseline({name: round(value) for name, value in figures.items()}, args.why)
        print(f"wrote {BASELINE.relative_to(ROOT)}")
    if args.json:
        print(json.dumps({"interpreter": interpreter(), "figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
