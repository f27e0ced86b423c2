"""A lean AMQP 1.0 benchmark client on python-qpid-proton: one role per process, one JSON line out.

    python bench/amqp_client.py send    --url amqp://127.0.0.1:PORT --address QUEUE [--user U --password P]
                                        -n N [--size 1024] [--window 1000] [--start-at EPOCH]
    python bench/amqp_client.py receive --url ... --address QUEUE -n N [--prefetch 100] [--idle 1]

send: N durable messages of --size bytes, unsettled (at-least-once), at most --window awaiting their outcome;
done when the broker has accepted all N (any other outcome is an error). --start-at holds the first transfer
until that moment, once the link is attached (the concurrent phase starts sender and receiver together).
receive: N messages with --prefetch credit kept topped up, each accepted and settled as it arrives; -n 0
drains until --idle seconds pass without a message.

Kept lean so that the broker, not the client, is measured: a bare proton Handler (no MessagingHandler
chain), the message encoded once and its bytes streamed for every delivery, received bytes never decoded.
The JSON line holds the messages done, when the first transfer went out or the receiver attached
(`started`), when the last one was settled (`finished`), this process's CPU seconds while its container
ran, and the error if any (exit status 1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from proton import Delivery, Endpoint, Handler, Message
from proton.reactor import Container


class Call(Handler):
    """A timer task that calls `action`."""

    def __init__(self, action) -> None:
        self.action = action

    def on_timer_task(self, event) -> None:
        self.action()


class Role(Handler):
    """Connection, deadline and error handling shared by the sender and the receiver."""

    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.done = 0
        self.started: float | None = None
        self.finished: float | None = None
        self.error: str | None = None
        self.closing = False
        self.connection = None
        self.timers: list = []

    def on_reactor_init(self, event) -> None:
        options = self.options
        credentials = {"user": options.user, "password": options.password} if options.user else {}
        self.connection = event.container.connect(options.url, handler=self, reconnect=False, **credentials)
        timeout = f"timeout after {options.timeout}s"
        self.schedule(event.container, options.timeout, lambda: self.stop(timeout))
        self.attach(event.container)

    def attach(self, container: Container) -> None:
        raise NotImplementedError

    def schedule(self, container: Container, delay: float, action) -> None:
        self.timers.append(container.schedule(delay, Call(action)))

    def stop(self, error: str | None = None) -> None:
        if self.closing:
            return
        self.closing = True
        self.error = error
        for timer in self.timers:
            timer.cancel()
        self.connection.close()

    def failed(self, what: str, condition) -> None:
        if not self.closing:
            self.stop(f"{what}: {condition.name}: {condition.description}" if condition else f"{what} closed")

    def on_transport_error(self, event) -> None:
        self.failed("transport", event.transport.condition)

    def on_connection_remote_close(self, event) -> None:
        self.failed("connection", event.connection.remote_condition)
        if event.connection.state & Endpoint.LOCAL_ACTIVE:
            event.connection.close()

    def on_session_remote_close(self, event) -> None:
        self.failed("session", event.session.remote_condition)

    def on_link_remote_close(self, event) -> None:
        self.failed("link", event.link.remote_condition)


class Send(Role):
    """Streams one pre-encoded durable message (a data section), at most `window` awaiting an outcome."""

    def __init__(self, options: argparse.Namespace) -> None:
        super().__init__(options)
        self.payload = Message(body=b"x" * options.size, durable=True, inferred=True).encode()
        self.sent = 0
        self.held = options.start_at is not None
        self.sender = None

    def attach(self, container: Container) -> None:
        self.sender = container.create_sender(self.connection, self.options.address)
        if self.held:
            self.schedule(container, max(0.0, self.options.start_at - time.time()), self.release)

    def release(self) -> None:
        self.held = False
        self.transfer()

    def on_link_flow(self, event) -> None:
        self.transfer()

    def transfer(self) -> None:
        sender = self.sender
        if self.held or self.closing or not sender.state & Endpoint.REMOTE_ACTIVE:
            return
        if self.started is None:
            self.started = time.time()
        limit = min(self.options.n, self.done + self.options.window)
        while self.sent < limit and sender.credit > 0:
            sender.delivery(str(self.sent))
            sender.stream(self.payload)
            sender.advance()
            self.sent += 1

    def on_delivery(self, event) -> None:
        delivery = event.delivery
        outcome = delivery.remote_state
        if outcome not in (Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED):
            return  # no outcome yet
        delivery.settle()
        if outcome != Delivery.ACCEPTED:
            self.stop(f"message {delivery.tag} settled {outcome}, not accepted")
            return
        self.done += 1
        if self.done == self.options.n:
            self.finished = time.time()
            self.stop()
        else:
            self.transfer()


class Receive(Role):
    """Accepts and settles every message as it arrives, keeping `prefetch` credit out (never beyond n)."""

    def __init__(self, options: argparse.Namespace) -> None:
        super().__init__(options)
        self.granted = 0
        self.receiver = None
        self.last = time.time()

    def attach(self, container: Container) -> None:
        self.receiver = container.create_receiver(self.connection, self.options.address)
        self.top_up()
        if self.options.n == 0:
            self.schedule(container, self.options.idle, lambda: self.idle(container))

    def idle(self, container: Container) -> None:
        quiet = time.time() - self.last
        if quiet >= self.options.idle:
            self.finished = self.last
            self.stop()
        else:
            self.schedule(container, self.options.idle - quiet, lambda: self.idle(container))

    def top_up(self) -> None:
        receiver = self.receiver
        want = self.options.prefetch - receiver.credit
        if self.options.n:
            want = min(want, self.options.n - self.granted)
        if want > 0:
            receiver.flow(want)
            self.granted += want

    def on_link_remote_open(self, event) -> None:
        self.started = time.time()

    def on_delivery(self, event) -> None:
        delivery = event.delivery
        if delivery.partial:
            return
        receiver = self.receiver
        receiver.recv(delivery.pending)
        receiver.advance()
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
        self.done += 1
        self.last = time.time()
        if self.done == self.options.n:
            self.finished = self.last
            self.stop()
        else:
            self.top_up()


def run(role: Role) -> dict:
    container = Container(role)
    container.container_id = f"sbfed-bench-{role.options.role}-{os.getpid()}"
    cpu = os.times()
    container.run()
    spent = os.times()
    return {"role": role.options.role, "messages": role.done, "started": role.started,
            "finished": role.finished, "cpu_s": spent.user + spent.system - cpu.user - cpu.system,
            "error": role.error}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=("send", "receive"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("-n", type=int, required=True, help="messages (receive: 0 drains until idle)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before giving up")
    parser.add_argument("--size", type=int, default=1024, help="send: body bytes")
    parser.add_argument("--window", type=int, default=1000, help="send: deliveries awaiting an outcome")
    parser.add_argument("--start-at", type=float, help="send: epoch seconds of the first transfer")
    parser.add_argument("--prefetch", type=int, default=100, help="receive: link credit")
    parser.add_argument("--idle", type=float, default=1.0, help="receive -n 0: seconds without a message")
    options = parser.parse_args(argv)
    result = run((Send if options.role == "send" else Receive)(options))
    print(json.dumps(result), flush=True)
    complete = options.n == 0 or result["messages"] == options.n
    return 0 if result["error"] is None and complete else 1


if __name__ == "__main__":
    sys.exit(main())
