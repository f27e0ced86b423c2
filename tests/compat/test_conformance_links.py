"""The link-level forms of .NET and Java that no installed SDK sends: CBS put-token as Microsoft.Azure.Amqp's
AmqpCbsLink sends it (pre-settled request/response pair named `duplex...:sender/receiver`, string
message-ids, a GUID reply address, `expiration` a timestamp), senders and receivers attached with
`com.microsoft:entity-type` (int), `com.microsoft:timeout` (uint) and `com.microsoft:tracking-id`, and a
ServiceBusMessageBatch framed as .NET's AmqpMessageConverter frames it: a transfer with message-format
0x80013700 whose envelope carries the first message's id and partition key, and each message a Data
section. Every reply and delivered message is checked against the one type table (wire_types)."""

from __future__ import annotations

import socket
import struct
import threading
import uuid
from collections.abc import Iterator

import pytest
from proton import Data, Message, Sender, int32, symbol, uint, ulong
from proton.utils import BlockingConnection

from local_broker.wire.amqp import codec
from local_broker.wire.amqp.values import encode_value
from patterns.drills.broker import BrokerNamespace
from tests.compat.test_raw_amqp import _settings
from tests.compat.wire_types import (
    ENTITY_TYPE,
    TIMEOUT,
    TRACKING_ID,
    Audit,
    LinkShape,
    RequestLink,
    decoded,
    dotnet_connection,
    next_delivery,
    put_token,
    raw_receiver,
    sas_token,
    status,
)

TOPOLOGY = {"namespaces": {"links": {"queues": {"q": {}, "batches": {}, "partitioned": {
    "enable_partitioning": True}}}}}
BATCH_FORMAT = 0x80013700
ATTACH, TRANSFER = 0x12, 0x14
DOTNET_LINK = {ENTITY_TYPE: int32(0), TIMEOUT: uint(60_000), TRACKING_ID: str(uuid.uuid4())}


@pytest.fixture(scope="module")
def namespace(serve) -> BrokerNamespace:
    return serve(TOPOLOGY)["links"]


@pytest.fixture
def connection(namespace: BrokerNamespace) -> Iterator[BlockingConnection]:
    host, _, _ = _settings(namespace)
    opened = BlockingConnection(f"amqp://{host}", timeout=10, allowed_mechs="ANONYMOUS")
    yield opened
    opened.close()


@pytest.mark.parametrize("sdk", [".NET", "Java"])
def test_put_token_in_the_sdks_form_authorizes_and_is_answered_in_its_types(namespace, connection,
                                                                             sdk) -> None:
    audit = Audit()
    cbs = RequestLink(connection, "$cbs", sdk=sdk)
    wrong = put_token(cbs, audit, *sas_token(namespace, "q", key="d3Jvbmc="))
    assert status(wrong) == 401 and type(wrong.application_properties["status-description"]) is str
    assert status(put_token(cbs, audit, *sas_token(namespace, "q"))) == 202
    assert {("cbs reply", "status-code"), ("cbs reply", "status-description"),
            ("cbs reply", "correlation-id")} <= audit.seen
    sender = connection.create_sender("q", options=LinkShape(properties=DOTNET_LINK))
    audit.attach("attach sender", sender.link)
    sender.send(Message(id=f"after-{sdk}", body=b"x"))
    _, deliveries = raw_receiver(connection, "q", credit=1, options=LinkShape(properties=DOTNET_LINK))
    got = next_delivery(connection, deliveries, "the message")
    audit.message(got.raw, tag=got.tag)
    got.settle()


class RawPayload:
    """An already encoded message for proton's `Sender.send` (the batch envelope)."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload

    def send(self, sender: Sender, tag: str | None = None) -> object:
        delivery = sender.delivery(tag or str(uuid.uuid4()))
        sender.stream(self.payload)
        sender.advance()
        return delivery


class BatchFraming:
    """A loopback proxy in front of the broker that gives every transfer on a client link whose name starts
    with `batch` the message-format 0x80013700, as .NET does for a batch (proton cannot set it)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.batch_links: set[tuple[int, int]] = set()  # (channel, handle)
        self.rewritten = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        client, _ = self.listener.accept()
        self.listener.close()  # one client per proxy
        broker = socket.create_connection(self.target)
        threading.Thread(target=self._pump, args=(broker, client, False), daemon=True).start()
        self._pump(client, broker, True)

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        """Copy what `source` sends to `sink` (the client's frames rewritten) until either side closes."""
        pending = b""
        try:
            while data := source.recv(65536):
                if not from_client:
                    sink.sendall(data)
                    continue
                pending, frames = self._frames(pending + data)
                sink.sendall(frames)
        except OSError:
            pass  # the other side closed first
        finally:
            source.close()
            sink.close()

    def _frames(self, pending: bytes) -> tuple[bytes, bytes]:
        """(what is left of an incomplete frame, the complete protocol headers and frames, rewritten)."""
        out = []
        while len(pending) >= 8:
            if pending.startswith(b"AMQP"):  # a protocol header
                out.append(pending[:8])
                pending = pending[8:]
                continue
            size = struct.unpack_from(">I", pending)[0]
            if len(pending) < size:
                break
            out.append(self._frame(pending[:size]))
            pending = pending[size:]
        return pending, b"".join(out)

    def _frame(self, frame: bytes) -> bytes:
        offset, kind, channel = frame[4] * 4, frame[5], struct.unpack_from(">H", frame, 6)[0]
        body = frame[offset:]
        if kind != 0 or body[:2] != b"\x00\x53" or body[2] not in (ATTACH, TRANSFER):
            return frame
        used = Data().decode(body)  # the performative's length; the payload follows it
        fields = list(decoded(body[:used]).value)
        if body[2] == ATTACH:
            if fields[2] is False and str(fields[0]).startswith("batch"):  # role sender: the client's
                self.batch_links.add((channel, fields[1]))
            return frame
        if (channel, fields[0]) not in self.batch_links:
            return frame
        fields += [None] * (4 - len(fields))
        fields[3] = uint(BATCH_FORMAT)
        self.rewritten += 1
        performative = b"\x00\x53" + bytes((TRANSFER,)) + encode_value(fields)
        rebuilt = performative + body[used:]
        return struct.pack(">IBBH", 8 + len(rebuilt), 2, 0, channel) + rebuilt


def dotnet_batch(messages: list[Message], partition_key: str | None) -> bytes:
    """The envelope .NET's BuildAmqpBatchFromMessages makes: message-annotations with the first message's
    partition key, properties with its message-id, then one Data section per encoded message."""
    sections = []
    if partition_key is not None:
        sections.append(codec.described(codec.MESSAGE_ANNOTATIONS, encode_value(
            {symbol("x-opt-partition-key"): partition_key})))
    sections.append(codec.described(codec.PROPERTIES, encode_value([messages[0].id])))
    for message in messages:
        sections.append(codec.described(codec.DATA, encode_value(bytes(message.encode()))))
    return b"".join(sections)


@pytest.mark.parametrize("queue, partition_key", [("batches", None), ("partitioned", "pk")])
def test_a_dotnet_batch_is_delivered_as_its_messages_with_their_own_fields(namespace, queue,
                                                                            partition_key) -> None:
    host, _, _ = _settings(namespace)
    proxy = BatchFraming(*host.split(":"))
    with dotnet_connection(namespace, f"127.0.0.1:{proxy.port}") as connection:
        audit = Audit(own=frozenset({"i", "kind"}))
        annotations = {symbol("x-opt-partition-key"): partition_key} if partition_key else None
        inner = [Message(id=f"{queue}-{i}", subject=f"s{i}", content_type="text/plain", ttl=60,
                         properties={"i": int32(i), "kind": ulong(i)}, body=f"body {i}".encode(),
                         annotations=annotations) for i in range(3)]
        sender = connection.create_sender(queue, name=f"batch-{uuid.uuid4()}",
                                          options=LinkShape(properties=DOTNET_LINK))
        sender.send(RawPayload(dotnet_batch(inner, partition_key)))
        assert proxy.rewritten == 1
        _, deliveries = raw_receiver(connection, queue, credit=3)
        for i in range(3):
            got = next_delivery(connection, deliveries, f"batch message {i}")
            m = audit.message(got.raw, tag=got.tag)
            assert (m.properties["message-id"], m.properties["subject"], m.body) == (
                f"{queue}-{i}", f"s{i}", [f"body {i}".encode()])
            assert (type(m.application_properties["i"]), type(m.application_properties["kind"])) == (
                int32, ulong)
            got.settle()
