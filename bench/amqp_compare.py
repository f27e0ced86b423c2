"""sbfed's broker side by side with RabbitMQ and Apache ActiveMQ Artemis, through the project's lean AMQP 1.0
client (amqp_client.py).

    python bench/amqp_compare.py [-n 10000] [--reps 3] [--warmup 5000] [--sync full|normal]
                                 [--peers rabbitmq,artemis]

Each repetition runs three phases of N 1 KB durable messages, at-least-once (sender window 1000, receiver
prefetch 100), every client in its own process:
  send        one sender; msg/s from its first transfer to the last accepted outcome;
  receive     one receiver of what was sent; msg/s from its attach to the last settlement;
  concurrent  a receiver and a sender released at the same moment; N / (last received - first sent).
Broker CPU per message is the broker process's utime + stime (/proc/PID/stat) across the phase; client CPU
is what the client processes report. After the phases a drain checks nothing was left or delivered twice.
Brokers, each a private process on a free loopback port, stopped afterwards:
- sbfed's broker with its durable SQLite store (`--sync`), the client authenticating with SASL PLAIN (policy
  name and key as user and password, as Service Bus accepts);
- RabbitMQ (Debian's `rabbitmq-server` with its `rabbitmq_amqp1_0` plugin, a durable classic queue) when
  installed (`bash scripts/ensure-rabbitmq.sh` installs it);
- Apache ActiveMQ Artemis (the pinned binary distribution from Maven Central, which
  `scripts/ensure-artemis.sh` fetches the first time): an instance made by `artemis create` in a temporary
  directory, one AMQP-only acceptor, the durable queue `bench` on its persistent journal (journal-datasync:
  synced before a durable send is acknowledged, the syncs grouped by the buffer timeout `create` measured on
  this disk; the journal type `create` picks: NIO without libaio).
A peer that cannot be had is skipped with one line saying why. `--peers ''` measures sbfed's broker only.
Prints the medians, then the reference figures recorded earlier on this machine, then one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from wire import process_cpu, start_broker  # bench/wire.py: `sbfed broker serve` as its own process

CLIENT = Path(__file__).resolve().with_name("amqp_client.py")
ENSURE_ARTEMIS = Path(__file__).resolve().parents[1] / "scripts" / "ensure-artemis.sh"
RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")  # Debian's /usr/sbin wrapper runs as rabbitmq
KEY = "YmVuY2gtY29tcGFyZS1rZXk="
TOPOLOGY = f"""namespaces:
  bench:
    policies:
      RootManageSharedAccessKey: {{key: "{KEY}", rights: [Manage, Send, Listen]}}
    queues:
      bench: {{}}
"""
# medians (msg/s: send, receive, concurrent) on this 2-core machine, 2026-11-22, by the proton client this one
# replaced (same phases and settings; on the same RabbitMQ in one run, 2026-11-23, both spent the same client
# and broker CPU per message within ~10 %, so these stay comparable)
REFERENCE = {
    "RabbitMQ 3.10 (durable classic queue)": (8600, 7700, 5500),
    "proton example broker (in memory)": (4100, 8300, 2100),
}
PHASES = ("send", "receive", "concurrent")
FIGURES = ("msgs_per_s", "broker_cpu_per_msg", "client_cpu_per_msg")
LEAD_S = 2.0  # concurrent phase: time for both clients to attach before the sender is released


@dataclass(frozen=True)
class Broker:
    label: str
    pid: int  # the process whose CPU is the broker's
    url: str
    address: str
    user: str
    password: str


def client(broker: Broker, role: str, n: int, *extra: str) -> list[str]:
    return [sys.executable, str(CLIENT), role, "--url", broker.url, "--address", broker.address, "--user",
            broker.user, "--password", broker.password, "-n", str(n), *extra]


def start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def outcome(process: subprocess.Popen) -> dict:
    """The JSON line of a client once it has exited; a failed client stops the bench."""
    out, err = process.communicate()
    lines = out.strip().splitlines()
    if process.returncode != 0:
        raise SystemExit(f"client {process.args[2]} failed ({process.returncode}): "
                         f"{lines[-1] if lines else ''} {err[-2000:]}")
    return json.loads(lines[-1])


def phase(broker: Broker, name: str, n: int) -> dict:
    """One phase of n messages: msg/s, broker and client CPU seconds per message."""
    if name == "concurrent":
        start_at = time.time() + LEAD_S
        clients = [start(client(broker, "receive", n)),
                   start(client(broker, "send", n, "--start-at", repr(start_at)))]
        time.sleep(max(0.0, start_at - time.time()))  # broker CPU from the moment the sender is released
        before = process_cpu(broker.pid)
    else:
        before = process_cpu(broker.pid)
        clients = [start(client(broker, name, n))]
    results = [outcome(c) for c in clients]
    broker_cpu = process_cpu(broker.pid) - before
    seconds = results[0]["finished"] - results[-1]["started"]
    return {"msgs_per_s": n / seconds, "broker_cpu_per_msg": broker_cpu / n,
            "client_cpu_per_msg": sum(r["cpu_s"] for r in results) / n}


def suite(broker: Broker, options: argparse.Namespace) -> dict:
    """Warm-up, --reps x the three phases, a drain; the min/median/max of every figure per phase."""
    print(f"== {broker.label}", flush=True)
    if options.warmup:
        phase(broker, "send", options.warmup)
        phase(broker, "receive", options.warmup)
    runs: dict[str, list[dict]] = {name: [] for name in PHASES}
    for rep in range(options.reps):
        for name in PHASES:
            figures = phase(broker, name, options.n)
            runs[name].append(figures)
            print(f"  rep {rep + 1} {name:<11} {figures['msgs_per_s']:8.0f} msg/s   broker "
                  f"{figures['broker_cpu_per_msg'] * 1e6:6.1f} us/msg   client "
                  f"{figures['client_cpu_per_msg'] * 1e6:6.1f} us/msg", flush=True)
    left = outcome(start(client(broker, "receive", 0)))["messages"]
    if left:
        raise SystemExit(f"{broker.label}: {left} messages left after the phases (delivered twice?)")
    return {name: {key: {"min": min(v), "median": statistics.median(v), "max": max(v)}
                   for key in FIGURES for v in [[r[key] for r in runs[name]]]}
            for name in PHASES}


@contextlib.contextmanager
def sbfed(workdir: Path, sync: str) -> Iterator[Broker]:
    proc, namespace = start_broker(workdir, False, sync, TOPOLOGY)
    try:
        yield Broker(f"sbfed (SQLite, synchronous={sync})", proc.pid, f"amqp://127.0.0.1:{namespace['amqp_port']}",
                     "bench", "RootManageSharedAccessKey", KEY)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"nothing listens on port {port} after {timeout}s")


def virtual_machine(root: int, prefix: str) -> int:
    """The pid of the process whose name starts with `prefix` (Erlang's beam.smp, java) that process `root` is
    or started through shell scripts."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1: stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            parents[int(entry.name)] = (int(rest[1]), name)
    for pid, (_, name) in parents.items():
        ancestor = pid
        while ancestor in parents and ancestor != root:
            ancestor = parents[ancestor][0]
        if ancestor == root and name.startswith(prefix):
            return pid
    raise SystemExit(f"no {prefix} process found under {root}")


class Unavailable(Exception):
    """A peer broker that cannot be had on this machine; the bench skips only its comparison."""


@contextlib.contextmanager
def serving(proc: subprocess.Popen, port: int, boot_s: float) -> Iterator[None]:
    """Until the block ends, a broker process started in its own session: listening on `port`, `boot_s` more
    seconds given to finish booting, then stopped with SIGTERM (its whole process group)."""
    try:
        wait_for_port(port, proc, 120)
        time.sleep(boot_s)
        yield
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)


@contextlib.contextmanager
def rabbitmq(workdir: Path) -> Iterator[Broker]:
    """A private RabbitMQ node with the AMQP 1.0 plugin, run as this user by the package's start script."""
    plugins_found = RABBITMQ_SERVER.parents[1].glob("lib/*/plugins/rabbitmq_amqp1_0*")
    if not (RABBITMQ_SERVER.exists() and any(plugins_found)):
        raise Unavailable("rabbitmq-server with its AMQP 1.0 plugin is not installed "
                          "(bash scripts/ensure-rabbitmq.sh installs it)")
    base = workdir / "rabbitmq"
    base.mkdir()
    plugins = base / "enabled_plugins"
    plugins.write_text("[rabbitmq_amqp1_0].\n")
    port = free_port()
    env = dict(os.environ, RABBITMQ_NODENAME=f"sbfedbench{port}@localhost",
               RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(port),
               RABBITMQ_DIST_PORT=str(free_port()),
               RABBITMQ_MNESIA_BASE=str(base / "mnesia"), RABBITMQ_LOG_BASE=str(base / "log"),
               RABBITMQ_ENABLED_PLUGINS_FILE=str(plugins), RABBITMQ_CONFIG_FILE=str(base / "rabbitmq"),
               HOME=str(base))
    proc = subprocess.Popen([str(RABBITMQ_SERVER)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    with serving(proc, port, 2):  # plugins finish booting after the listener opens
        yield Broker("RabbitMQ (durable classic queue)", virtual_machine(proc.pid, "beam"),
                     f"amqp://127.0.0.1:{port}", "/queue/bench", "guest", "guest")


@contextlib.contextmanager
def artemis(workdir: Path) -> Iterator[Broker]:
    """A private Artemis instance: `artemis create` (journal tuned to this disk by its own probe), its one
    acceptor narrowed to AMQP on a free loopback port, then `artemis run`, which execs the JVM."""
    fetched = subprocess.run(["bash", str(ENSURE_ARTEMIS)], capture_output=True, text=True)
    if fetched.returncode != 0:
        raise Unavailable((fetched.stderr.strip().splitlines() or ["scripts/ensure-artemis.sh failed"])[-1])
    home = Path(fetched.stdout.strip().splitlines()[-1])
    instance, port = workdir / "artemis", free_port()
    subprocess.run([str(home / "bin" / "artemis"), "create", "--silent", "--force", "--user", "bench",
                    "--password", "bench", "--require-login", "--no-web", "--host", "127.0.0.1",
                    "--default-port", str(port), "--no-amqp-acceptor", "--no-hornetq-acceptor",
                    "--no-mqtt-acceptor", "--no-stomp-acceptor", "--queues", "bench:anycast", str(instance)],
                   check=True, stdout=subprocess.DEVNULL)
    config = instance / "etc" / "broker.xml"
    xml = config.read_text()
    config.write_text(xml.replace("protocols=CORE,AMQP,STOMP,HORNETQ,MQTT,OPENWIRE", "protocols=AMQP"))
    journal = re.search(r"<journal-type>(\w+)</journal-type>", xml)
    log = (workdir / "artemis.log").open("w")
    proc = subprocess.Popen([str(instance / "bin" / "artemis"), "run"], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    with log, serving(proc, port, 1):
        label = f"Artemis {home.name.rsplit('-', 1)[-1]} (durable, {journal[1] if journal else '?'} journal)"
        yield Broker(label, virtual_machine(proc.pid, "java"), f"amqp://127.0.0.1:{port}", "bench", "bench",
                     "bench")


def print_targets(results: dict[str, dict]) -> None:
    """The target, per peer and phase: sbfed at least the peer's rate and at most its broker CPU per message
    (medians of this run)."""
    sbfed = next((r for label, r in results.items() if label.startswith("sbfed")), None)
    for label, peer in results.items():
        if peer is sbfed or sbfed is None:
            continue
        verdicts = []
        for name in PHASES:
            ours, theirs = sbfed[name], peer[name]
            rate = ours["msgs_per_s"]["median"] / theirs["msgs_per_s"]["median"]
            cpu = ours["broker_cpu_per_msg"]["median"] / theirs["broker_cpu_per_msg"]["median"]
            met = "met" if rate >= 1 and cpu <= 1 else "missed"
            verdicts.append(f"{name} {met} (rate {rate:.2f}x, broker CPU {cpu:.2f}x)")
        print(f"target (sbfed >= {label}'s rate, <= its broker CPU per message): " + "; ".join(verdicts))


PEERS = {"rabbitmq": rabbitmq, "artemis": artemis}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=10000, help="messages per phase")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5000, help="messages sent and received first, untimed")
    parser.add_argument("--sync", choices=("full", "normal"), default="full", help="sbfed SQLite durability")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"peers measured after sbfed, of {', '.join(PEERS)}; '' for none")
    options = parser.parse_args(argv)
    peers = [name for name in options.peers.split(",") if name]
    if unknown := set(peers) - set(PEERS):
        parser.error(f"unknown peers: {', '.join(sorted(unknown))}")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="sbfed-amqp-compare-") as tmp:
        with sbfed(Path(tmp), options.sync) as broker:
            results[broker.label] = suite(broker, options)
        for name in peers:
            try:
                with PEERS[name](Path(tmp)) as broker:
                    results[broker.label] = suite(broker, options)
            except Unavailable as why:
                print(f"{name} comparison skipped: {why}", flush=True)
    print(f"\nmedians, n={options.n} x {options.reps} reps, 1 KB durable messages, bench/amqp_client.py "
          "(msg/s; broker CPU per message)")
    print(f"{'broker':<44}" + "".join(f"{p:>22}" for p in PHASES))
    for label, summary in results.items():
        print(f"{label:<44}" + "".join(f"{summary[p]['msgs_per_s']['median']:>12.0f}; "
                                        f"{summary[p]['broker_cpu_per_msg']['median'] * 1e6:>6.0f} us"
                                        for p in PHASES))
    for label, figures in REFERENCE.items():
        print(f"{'reference: ' + label:<44}" + "".join(f"{f:>12}{'':>10}" for f in figures))
    print_targets(results)
    print(json.dumps({"n": options.n, "reps": options.reps, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
