"""Throughput of the broker's REST messaging (the management port's HTTP data plane), and its CPU per message.

    python bench/rest.py [--messages 3000] [--size 1024] [--connections 4] [--batch 100] [--in-memory]

Starts `sbfed broker serve` (durable SQLite, synchronous=full, unless --in-memory) as its own process and
drives it with plain HTTP (http.client, keep-alive, --connections clients in parallel) as a script or a
device would:
- send: one `POST /{queue}/messages` per message, BrokerProperties and one custom property set;
- batch send: `POST /{queue}/messages` with application/vnd.microsoft.servicebus.json, --batch per request;
- peek-lock + complete: `POST /{queue}/messages/head?timeout=5`, then `DELETE` of its Location;
each printed as messages/s with the CPU per message of the broker process and of this client process
(bench/wire.py's measure). The last line is the figures as JSON.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.wire import Phase, start_broker  # noqa: E402
from local_broker.auth import generate_sas_token  # noqa: E402

QUEUE = "wire"  # bench/wire.py's topology


class Client:
    """One keep-alive HTTP connection to the management port, with a SAS token for the namespace."""

    def __init__(self, port: int, token: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.token = token

    def request(self, method: str, path: str, body: bytes = b"", **headers: str) -> http.client.HTTPResponse:
        self.connection.request(method, path, body=body, headers={"Authorization": self.token, **headers})
        response = self.connection.getresponse()
        response.read()
        return response

    def send(self, count: int, body: bytes) -> None:
        for i in range(count):
            answer = self.request("POST", f"/{QUEUE}/messages", body,
                                  BrokerProperties=json.dumps({"MessageId": str(i), "Label": "bench"}),
                                  Priority='"High"')
            if answer.status != 201:
                raise SystemExit(f"send answered {answer.status}")

    def send_batches(self, count: int, body: bytes, per_batch: int) -> None:
        item = {"Body": body.decode(), "UserProperties": {"Priority": "High"}}
        while count > 0:
            size = min(per_batch, count)
            answer = self.request("POST", f"/{QUEUE}/messages", json.dumps([item] * size).encode(),
                                  **{"Content-Type": "application/vnd.microsoft.servicebus.json"})
            if answer.status != 201:
                raise SystemExit(f"batch send answered {answer.status}")
            count -= size

    def receive_and_complete(self, count: int) -> None:
        for _ in range(count):
            answer = self.request("POST", f"/{QUEUE}/messages/head?timeout=5")
            if answer.status != 201:
                raise SystemExit(f"peek-lock answered {answer.status}: a message is missing")
            if self.request("DELETE", urlsplit(answer.headers["Location"]).path).status != 200:
                raise SystemExit("complete failed")


def in_parallel(clients: list[Client], count: int, work: str, *args: object) -> None:
    shares = [count // len(clients) + (i < count % len(clients)) for i in range(len(clients))]
    with ThreadPoolExecutor(len(clients)) as pool:
        list(pool.map(lambda pair: getattr(pair[0], work)(pair[1], *args), zip(clients, shares, strict=True)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--batch", type=int, default=100, help="messages per batch request")
    parser.add_argument("--in-memory", action="store_true", help="memory store instead of durable SQLite")
    args = parser.parse_args()
    body = b"x" * args.size
    with tempfile.TemporaryDirectory(prefix="sbfed-rest-bench-") as tmp:
        proc, namespace = start_broker(Path(tmp), args.in_memory, "full")
        try:
            fields = dict(part.split("=", 1) for part in namespace["connection_string"].split(";")
                          if "=" in part)
            port = namespace["admin_port"]
            token = generate_sas_token(f"http://127.0.0.1:{port}", fields["SharedAccessKeyName"],
                                       fields["SharedAccessKey"], int(time.time()) + 3600)
            clients = [Client(port, token) for _ in range(args.connections)]
            store = "in-memory" if args.in_memory else "durable SQLite (synchronous=full)"
            print(f"broker pid {proc.pid}, {store} store, {args.messages} x {args.size} B messages, "
                  f"{args.connections} HTTP connections", flush=True)
            in_parallel(clients, 100, "send", body)  # warm-up: connections, first commits
            in_parallel(clients, 100, "receive_and_complete")
            phases = []
            with Phase("REST send", proc.pid, args.messages) as phase:
                in_parallel(clients, args.messages, "send", body)
            phases.append(phase)
            with Phase("REST peek-lock+complete", proc.pid, args.messages) as phase:
                in_parallel(clients, args.messages, "receive_and_complete")
            phases.append(phase)
            with Phase(f"REST batch send ({args.batch})", proc.pid, args.messages) as phase:
                in_parallel(clients, args.messages, "send_batches", body, args.batch)
            phases.append(phase)
            in_parallel(clients, args.messages, "receive_and_complete")  # the batch's messages all came back
            results = [phase.report() for phase in phases]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(json.dumps({"store": "memory" if args.in_memory else "sqlite-full", "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
