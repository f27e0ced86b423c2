"""The local broker side by side with a broker people trust, through one lean AMQP 1.0 client.

    python bench/amqp_compare.py [-n 10000] [--reps 3] [--sync full|normal] [--rabbitmq] [--bench PATH]

Runs the shared proton benchmark client (`../shared/bench/amqp_bench.py suite`: send, receive, and both at
once; at-least-once; 1 KB durable messages) unchanged against
- sbfed's broker with its durable SQLite store, the client authenticating with SASL PLAIN (policy name and
  key as user and password, as Service Bus accepts);
- with --rabbitmq, a private RabbitMQ node (Debian's `rabbitmq-server` with the `rabbitmq_amqp1_0`
  plugin, a durable classic queue), started on a free port and stopped afterwards.
Prints the median msg/s and broker CPU per message of each phase, with the reference figures measured
on this 2-core machine for context.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BENCH = ROOT.parent / "shared" / "bench" / "amqp_bench.py"
KEY = "YmVuY2gtY29tcGFyZS1rZXk="
TOPOLOGY = f"""namespaces:
  bench:
    policies:
      RootManageSharedAccessKey: {{key: "{KEY}", rights: [Manage, Send, Listen]}}
    queues:
      bench: {{}}
"""
REFERENCE = {  # medians measured on this machine (msg/s): send, receive, concurrent
    "RabbitMQ 3.10 (durable classic queue)": (8600, 7700, 5500),
    "proton example broker (in memory)": (4100, 8300, 2100),
}
PHASES = ("send", "recv", "concurrent")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the broker exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"nothing listens on port {port} after {timeout}s")


def run_suite(bench: Path, label: str, url: str, address: str, user: str, password: str, broker_pid: int,
              args: argparse.Namespace, out: Path) -> dict:
    command = [sys.executable, str(bench), "suite", "--url", url, "--address", address, "--user", user,
               "--password", password, "--broker-pid", str(broker_pid), "-n", str(args.n), "--reps",
               str(args.reps), "--label", label, "--out", str(out)]
    print(f"== {label}", flush=True)
    subprocess.run(command, check=True)
    return json.loads(out.read_text())["summary"]


def bench_sbfed(bench: Path, args: argparse.Namespace, workdir: Path) -> dict:
    topology = workdir / "topology.yaml"
    topology.write_text(TOPOLOGY)
    ready = workdir / "ready.json"
    command = [sys.executable, "-m", "sbfed.cli", "broker", "serve", "--topology", str(topology), "--data",
               str(workdir / "sbfed-data"), "--sync", args.sync, "--ready-file", str(ready),
               "--log-level", "WARNING"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while not ready.exists():
            if proc.poll() is not None or time.time() > deadline:
                raise SystemExit("the sbfed broker did not start")
            time.sleep(0.1)
        port = json.loads(ready.read_text())[0]["amqp_port"]
        return run_suite(bench, f"sbfed (SQLite, synchronous={args.sync})", f"amqp://127.0.0.1:{port}",
                         "bench", "RootManageSharedAccessKey", KEY, proc.pid, args, workdir / "sbfed.json")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def erlang_vm(root: int) -> int:
    """The pid of the `beam.smp` process started (through shell scripts) by process `root`."""
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
        if ancestor == root and name.startswith("beam"):
            return pid
    raise SystemExit("no Erlang VM found under the RabbitMQ start script")


def bench_rabbitmq(bench: Path, args: argparse.Namespace, workdir: Path) -> dict:
    # Debian's /usr/sbin wrapper switches to the rabbitmq user; the real script runs a private node as us.
    server = "/usr/lib/rabbitmq/bin/rabbitmq-server"
    if not Path(server).exists():
        raise SystemExit("rabbitmq-server is not installed (apt-get install rabbitmq-server)")
    base = workdir / "rabbitmq"
    base.mkdir()
    plugins = base / "enabled_plugins"
    plugins.write_text("[rabbitmq_amqp1_0].\n")
    port = free_port()
    env = dict(os.environ, RABBITMQ_NODENAME=f"sbfedbench{port}@localhost",
               RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
               RABBITMQ_NODE_PORT=str(port), RABBITMQ_DIST_PORT=str(free_port()),
               RABBITMQ_MNESIA_BASE=str(base / "mnesia"), RABBITMQ_LOG_BASE=str(base / "log"),
               RABBITMQ_ENABLED_PLUGINS_FILE=str(plugins), RABBITMQ_CONFIG_FILE=str(base / "rabbitmq"),
               HOME=str(base))
    proc = subprocess.Popen([server], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_for_port(port, proc, 120)
        time.sleep(2)  # plugins finish booting after the listener opens
        pid = erlang_vm(proc.pid)
        return run_suite(bench, "RabbitMQ (durable classic queue)", f"amqp://127.0.0.1:{port}",
                         "/queue/bench", "guest", "guest", pid, args, workdir / "rabbitmq.json")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=10000, help="messages per phase")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sync", choices=("full", "normal"), default="full", help="sbfed SQLite durability")
    parser.add_argument("--rabbitmq", action="store_true", help="also run a private RabbitMQ node")
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH, help="path of amqp_bench.py")
    args = parser.parse_args()
    if not args.bench.exists():
        raise SystemExit(f"{args.bench} not found (--bench PATH)")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="sbfed-amqp-compare-") as tmp:
        results["sbfed"] = bench_sbfed(args.bench, args, Path(tmp))
        if args.rabbitmq:
            results["rabbitmq"] = bench_rabbitmq(args.bench, args, Path(tmp))
    print(f"\nmedians, n={args.n} x {args.reps} reps, 1 KB durable messages (msg/s; broker CPU us/msg)")
    print(f"{'broker':<44}" + "".join(f"{p:>22}" for p in PHASES))
    for name, summary in results.items():
        cells = "".join(f"{summary[p]['msgs_per_s']['median']:>12.0f}; "
                        f"{summary[p]['broker_cpu_per_msg']['median'] * 1e6:>6.0f} us" for p in PHASES)
        print(f"{name:<44}{cells}")
    for name, figures in REFERENCE.items():
        print(f"{'reference: ' + name:<44}" + "".join(f"{f:>12}{'':>10}" for f in figures))
    print(json.dumps({"n": args.n, "reps": args.reps, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
