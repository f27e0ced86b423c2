"""Wire throughput of the local broker with the real azure-servicebus SDK, and who spends the CPU.

    python bench/wire.py [--messages 5000] [--size 1024] [--prefetch 100] [--in-memory | --sync normal]

Starts `sbfed broker serve` (durable SQLite store unless --in-memory) as its own process, then from this
process drives it with the SDK:
- batch send: `ServiceBusMessageBatch`es of 1 KB messages until --messages are sent;
- peek-lock receive + complete: a receiver with prefetch 100 receives and completes every message;
then both again over AMQPS (TLS, the broker's certificate verified), and the TLS cost per message of each
side. For each phase it prints messages/s and the CPU seconds per message of the broker process (from
/proc/PID/stat) and of this client process (os.times), and whether the broker spent at most half the
client's CPU per message (the target: a broker serving many clients on 2 cores leaves them the CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage, TransportType

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
TOPOLOGY = """namespaces:
  bench:
    queues:
      wire: {}
"""


def process_cpu(pid: int) -> float:
    """utime + stime of a whole process, seconds."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def start_broker(workdir: Path, in_memory: bool, sync: str, topology_text: str = TOPOLOGY
                 ) -> tuple[subprocess.Popen, dict]:
    """`sbfed broker serve` as its own process; returns it and its first namespace's ready-file entry."""
    topology = workdir / "topology.yaml"
    topology.write_text(topology_text)
    ready = workdir / "ready.json"
    store = ["--in-memory"] if in_memory else ["--data", str(workdir / "data"), "--sync", sync]
    command = [sys.executable, "-m", "sbfed.cli", "broker", "serve", "--topology", str(topology), *store,
               "--amqp-port", "0", "--admin-port", "0", "--ready-file", str(ready), "--log-level", "WARNING"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    deadline = time.time() + 30
    while not ready.exists():
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit("the broker did not start")
        time.sleep(0.1)
    return proc, json.loads(ready.read_text())[0]


class Phase:
    """Wall time and CPU of broker and client around one phase."""

    def __init__(self, name: str, broker_pid: int, count: int) -> None:
        self.name, self.pid, self.count = name, broker_pid, count

    def __enter__(self) -> Phase:
        self.t0, self.b0, self.c0 = time.perf_counter(), process_cpu(self.pid), own_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        self.broker = (process_cpu(self.pid) - self.b0) / self.count
        self.client = (own_cpu() - self.c0) / self.count

    def report(self) -> dict:
        verdict = ("target met: broker <= half the client" if self.broker <= self.client / 2
                   else "target missed: broker > half the client")
        print(f"{self.name:<26} {self.count / self.wall:8.0f} msg/s   broker {self.broker * 1e6:7.1f} us/msg"
              f"   client {self.client * 1e6:7.1f} us/msg   {verdict}", flush=True)
        return {"phase": self.name, "msgs_per_s": self.count / self.wall, "broker_cpu_per_msg": self.broker,
                "client_cpu_per_msg": self.client}


def batch_send(client: ServiceBusClient, count: int, size: int) -> None:
    body = b"x" * size
    with client.get_queue_sender("wire") as sender:
        sent = 0
        while sent < count:
            batch = sender.create_message_batch()
            while sent < count:
                try:
                    batch.add_message(ServiceBusMessage(body))
                except ValueError:
                    break
                sent += 1
            sender.send_messages(batch)


def receive_and_complete(client: ServiceBusClient, count: int, prefetch: int) -> None:
    with client.get_queue_receiver("wire", prefetch_count=prefetch, max_wait_time=10) as receiver:
        done = 0
        while done < count:
            messages = receiver.receive_messages(max_message_count=prefetch, max_wait_time=10)
            if not messages:
                raise SystemExit(f"only {done} of {count} messages came back")
            for message in messages:
                receiver.complete_message(message)
            done += len(messages)


def run_phases(client: ServiceBusClient, label: str, broker_pid: int, args: argparse.Namespace
               ) -> tuple[Phase, Phase]:
    """A warm-up, then the two measured phases on `client`'s connection."""
    with client:
        batch_send(client, 200, args.size)  # warm-up: connections, first commits
        receive_and_complete(client, 200, args.prefetch)
        with Phase("batch send" + label, broker_pid, args.messages) as send:
            batch_send(client, args.messages, args.size)
        with Phase("peek-lock receive+complete" + label, broker_pid, args.messages) as receive:
            receive_and_complete(client, args.messages, args.prefetch)
    return send, receive


def report_tls_cost(without: Phase, with_tls: Phase) -> None:
    broker, client = (with_tls.broker - without.broker) * 1e6, (with_tls.client - without.client) * 1e6
    print(f"TLS cost, {without.name:<26} broker {broker:+7.1f} us/msg   client {client:+7.1f} us/msg",
          flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--in-memory", action="store_true", help="memory store instead of durable SQLite")
    parser.add_argument("--sync", choices=("full", "normal"), default="full", help="SQLite durability")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sbfed-wire-bench-") as tmp:
        proc, namespace = start_broker(Path(tmp), args.in_memory, args.sync)
        try:
            store = "in-memory" if args.in_memory else f"durable SQLite (synchronous={args.sync})"
            print(f"broker pid {proc.pid}, {store} store, {args.messages} x {args.size} B messages, "
                  f"prefetch {args.prefetch}", flush=True)
            plain = ServiceBusClient.from_connection_string(namespace["connection_string"])
            amqps = ServiceBusClient.from_connection_string(
                namespace["amqps_connection_string"], transport_type=TransportType.Amqp,
                custom_endpoint_address=f"sb://localhost:{namespace['amqps_port']}",
                connection_verify=namespace["cert_path"])
            phases = [run_phases(plain, "", proc.pid, args), run_phases(amqps, " (AMQPS)", proc.pid, args)]
            results = [phase.report() for pair in phases for phase in pair]
            for without, with_tls in zip(*phases, strict=True):
                report_tls_cost(without, with_tls)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(json.dumps({"store": "memory" if args.in_memory else f"sqlite-{args.sync}", "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
