"""Raw AMQP (python-qpid-proton as the client) for the forms official SDKs send that no installed SDK does:
every way a client names the link a `$cbs` or `$management` reply goes to, a put-token on a fresh connection
before any other link, a request sent before its reply link is attached, the settlement modes go-amqp asks
for, and the lock token where the Go SDK reads it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from proton import UNDESCRIBED, Array, Data, Described, Link, Message, Timeout, symbol, uint, ulong
from proton.reactor import LinkOption
from proton.utils import BlockingConnection, LinkDetached

from local_broker.auth import generate_sas_token
from local_broker.wire.amqp.endpoint import MAX_UNROUTED_REPLIES
from patterns.drills.broker import BrokerNamespace

TOPOLOGY = {"namespaces": {"raw": {"queues": {"q": {}, "sessions": {"requires_session": True}}}}}
GO_SESSION_FILTER = ulong(0x137000000C)  # the descriptor azservicebus (go-amqp) puts on its session filter
TIMEOUT_S = 10


@dataclass(frozen=True)
class Addresses(LinkOption):
    """Sets a link's source and/or target address as the SDK in question does."""

    source: str | None = None
    target: str | None = None

    def apply(self, link) -> None:
        if self.source is not None:
            link.source.address = self.source
        if self.target is not None:
            link.target.address = self.target


@dataclass(frozen=True)
class ReplyForm:
    """How an SDK attaches a request/response pair to `node` and names its reply link in `reply-to`."""

    sender_name: str | None
    receiver_name: str | None
    sender_source: str | None
    receiver_target: str | None
    reply_to: str | None


def forms(node: str) -> dict[str, ReplyForm]:
    reply = f"reply-{uuid.uuid4()}"
    return {
        "link name (JS $cbs)": ReplyForm(None, reply, None, None, reply),
        "receiver target (.NET, Go, JS $management)": ReplyForm(None, None, None, reply, reply),
        "sender source and receiver target (Java)": ReplyForm(
            f"{reply}:sender", f"{reply}:receiver", reply, reply, reply),
        "node address (Python $management)": ReplyForm(None, None, None, node, node),
        "no reply-to (Python $cbs)": ReplyForm(None, None, None, None, None),
        "reply-to naming no link": ReplyForm(None, None, None, None, "nowhere"),
    }


FORM_NAMES = list(forms("node"))


@pytest.fixture(scope="module")
def namespace(serve) -> BrokerNamespace:
    return serve(TOPOLOGY)["raw"]


def _settings(namespace: BrokerNamespace) -> tuple[str, str, str]:
    fields = dict(part.split("=", 1) for part in namespace.connection_string.split(";") if part)
    return fields["Endpoint"].removeprefix("sb://"), fields["SharedAccessKeyName"], fields["SharedAccessKey"]


@pytest.fixture
def connection(namespace: BrokerNamespace) -> Iterator[BlockingConnection]:
    """A fresh AMQP connection (SASL ANONYMOUS, no token yet)."""
    host, _, _ = _settings(namespace)
    opened = BlockingConnection(f"amqp://{host}", timeout=TIMEOUT_S, allowed_mechs="ANONYMOUS")
    yield opened
    opened.close()


def authorize(connection: BlockingConnection, namespace: BrokerNamespace) -> None:
    """A put-token for the whole namespace, in the JavaScript SDK's form."""
    form = forms("$cbs")["link name (JS $cbs)"]
    assert request(connection, "$cbs", form, put_token_request(namespace, "", None)).properties[
        "status-code"] == 202


def put_token_request(namespace: BrokerNamespace, audience_path: str, reply_to: str | None,
                      key: str | None = None) -> Message:
    host, key_name, real_key = _settings(namespace)
    audience = f"sb://{host}/{audience_path}"
    token = generate_sas_token(audience, key_name, key or real_key, int(time.time()) + 3600)
    return Message(id=uuid.uuid4(), reply_to=reply_to, body=token, properties={
        "operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": audience})


def peek_request(reply_to: str | None) -> Message:
    return Message(id=uuid.uuid4(), reply_to=reply_to, body={"from-sequence-number": 1, "message-count": 1},
                   properties={"operation": "com.microsoft:peek-message"})


def request(connection: BlockingConnection, node: str, form: ReplyForm, message: Message,
            *, reply_link_after_request: bool = False) -> Message:
    """Send `message` to `node` over a pair attached as `form` says and return the reply."""
    sender_options = Addresses(source=form.sender_source)
    receiver_options = Addresses(target=form.receiver_target)
    message.reply_to = form.reply_to
    sender = connection.create_sender(node, name=form.sender_name, options=sender_options)
    if reply_link_after_request:
        sender.send(message)
        receiver = connection.create_receiver(node, name=form.receiver_name, options=receiver_options)
    else:
        receiver = connection.create_receiver(node, name=form.receiver_name, options=receiver_options)
        sender.send(message)
    reply = receiver.receive(timeout=TIMEOUT_S)
    receiver.accept()
    sender.close()
    receiver.close()
    assert reply.correlation_id == message.id
    return reply


@pytest.mark.parametrize("form_name", FORM_NAMES)
def test_cbs_and_management_replies_reach_the_reply_link_however_it_is_named(
        namespace, form_name, connection) -> None:
    cbs = request(connection, "$cbs", forms("$cbs")[form_name], put_token_request(namespace, "q", None))
    assert cbs.properties["status-code"] == 202
    node = "q/$management"
    peek = request(connection, node, forms(node)[form_name], peek_request(None))
    assert peek.properties["statusCode"] == 204  # the queue is empty


@pytest.mark.parametrize("form_name", [
    "receiver target (.NET, Go, JS $management)", "no reply-to (Python $cbs)"])
def test_a_request_sent_before_its_reply_link_is_attached_is_answered(
        namespace, form_name, connection) -> None:
    cbs = request(connection, "$cbs", forms("$cbs")[form_name], put_token_request(namespace, "q", None),
                  reply_link_after_request=True)
    assert cbs.properties["status-code"] == 202
    node = "q/$management"
    peek = request(connection, node, forms(node)[form_name], peek_request(None),
                   reply_link_after_request=True)
    assert peek.properties["statusCode"] == 204


def test_a_put_token_first_on_a_fresh_connection_authorizes_the_links_after_it(namespace, connection) -> None:
    form = forms("$cbs")["receiver target (.NET, Go, JS $management)"]
    assert request(connection, "$cbs", form, put_token_request(namespace, "q", None)).properties[
        "status-code"] == 202
    sender = connection.create_sender("q")
    sender.send(Message(id="raw-1", body=b"raw"))
    receiver = connection.create_receiver("q", credit=1)
    received = receiver.receive(timeout=TIMEOUT_S)
    receiver.accept()
    assert (received.id, received.body) == ("raw-1", b"raw")


def test_links_without_a_token_or_with_a_wrong_one_are_refused(namespace, connection) -> None:
    with pytest.raises(LinkDetached, match="Unauthorized"):
        connection.create_sender("q")
    form = forms("$cbs")["link name (JS $cbs)"]
    wrong = request(connection, "$cbs", form, put_token_request(namespace, "q", None, key="wrong"))
    assert wrong.properties["status-code"] == 401


def test_a_token_for_the_management_node_authorizes_management_only(namespace, connection) -> None:
    form = forms("$cbs")["link name (JS $cbs)"]
    granted = request(connection, "$cbs", form, put_token_request(namespace, "Q/$Management?x=1", None))
    assert granted.properties["status-code"] == 202
    node = "q/$management"
    peek = request(connection, node, forms(node)["link name (JS $cbs)"], peek_request(None))
    assert peek.properties["statusCode"] == 204
    with pytest.raises(LinkDetached, match="Unauthorized"):
        connection.create_sender("q")


def test_attach_advertises_the_entity_max_message_size_on_every_link(namespace, connection) -> None:
    authorize(connection, namespace)
    sender = connection.create_sender("q")
    receiver = connection.create_receiver("q", credit=0)
    assert sender.link.remote_max_message_size == 256 * 1024
    assert receiver.link.remote_max_message_size == 256 * 1024
    assert sender.link.remote_properties == {symbol("com.microsoft:max-message-batch-size"): 256 * 1024}


def test_a_request_with_a_ulong_message_id_is_answered(namespace, connection) -> None:
    """Java's request/response channel numbers its requests with ulong message ids (that the reply keeps
    the type is tests/unit/wire/test_amqp_codec.py's: proton's Message reads both as int)."""
    form = forms("$cbs")["sender source and receiver target (Java)"]
    message = put_token_request(namespace, "", None)
    message.id = ulong(7)
    reply = request(connection, "$cbs", form, message)
    assert reply.properties["status-code"] == 202
    assert reply.correlation_id == 7


@dataclass(frozen=True)
class SessionFilter(LinkOption):
    value: object

    def apply(self, link) -> None:
        link.source.filter.put_dict({symbol("com.microsoft:session-filter"): self.value})


def _echoed_filter(receiver) -> object:
    data = receiver.link.remote_source.filter
    data.rewind()
    data.next()
    return data.get_object()[symbol("com.microsoft:session-filter")]


@pytest.mark.parametrize("wanted", ["G", None], ids=["named", "next-available"])
def test_a_described_session_filter_as_go_sends_it(namespace, wanted, connection) -> None:
    authorize(connection, namespace)
    sender = connection.create_sender("sessions")
    sender.send(Message(id="in-g", group_id="G", body=b"g"))
    receiver = connection.create_receiver(
        "sessions", credit=1, options=SessionFilter(Described(GO_SESSION_FILTER, wanted)))
    assert _echoed_filter(receiver) == Described(GO_SESSION_FILTER, "G")
    received = receiver.receive(timeout=TIMEOUT_S)
    receiver.accept()
    assert (received.id, received.group_id) == ("in-g", "G")


@pytest.mark.parametrize("waiting", [0, 2])
def test_a_drain_gets_what_is_there_then_the_credit_back(namespace, waiting, connection) -> None:
    """A receiver that drains (the JS SDK at the end of each receiveMessages wait, Python on close, Go on
    ReceiveMessages) gets the messages there are, then its unused credit back at once."""
    authorize(connection, namespace)
    sender = connection.create_sender("q")
    for i in range(waiting):
        sender.send(Message(id=f"drain-{i}", body=b"d"))
    receiver = connection.create_receiver("q", credit=0)
    receiver.link.drain(5)
    connection.wait(lambda: receiver.link.credit == 0 and len(receiver.fetcher.incoming) == waiting,
                    timeout=TIMEOUT_S, msg="the broker did not answer the drain")
    ids = []
    for _ in range(waiting):
        ids.append(receiver.receive(timeout=TIMEOUT_S).id)
        receiver.accept()
    assert ids == [f"drain-{i}" for i in range(waiting)]


def test_replies_waiting_for_a_reply_link_are_bounded_and_the_newest_kept(namespace, connection) -> None:
    form = forms("$cbs")["receiver target (.NET, Go, JS $management)"]
    sender = connection.create_sender("$cbs")
    sent = []
    for _ in range(MAX_UNROUTED_REPLIES + 20):
        message = put_token_request(namespace, "", form.reply_to)
        sender.send(message)
        sent.append(message.id)
    receiver = connection.create_receiver("$cbs", credit=200, options=Addresses(target=form.reply_to))
    answered = []
    while len(answered) < len(sent):
        try:
            answered.append(receiver.receive(timeout=2).correlation_id)
        except Timeout:
            break
        receiver.accept()
    assert answered == sent[-MAX_UNROUTED_REPLIES:]


@dataclass(frozen=True)
class SettleModes(LinkOption):
    """Asks for settlement modes, as go-amqp does (and then refuses an attach that answers others)."""

    snd: int
    rcv: int

    def apply(self, link) -> None:
        link.snd_settle_mode, link.rcv_settle_mode = self.snd, self.rcv


@pytest.mark.parametrize(("node", "snd"), [("$cbs", Link.SND_SETTLED), ("q", Link.SND_SETTLED),
                                           ("q", Link.SND_UNSETTLED), ("q", Link.SND_MIXED)])
def test_an_attach_answers_with_the_settlement_modes_asked_for(namespace, connection, node, snd) -> None:
    authorize(connection, namespace)
    receiver = connection.create_receiver(node, credit=0, options=SettleModes(snd, Link.RCV_FIRST))
    sender = connection.create_sender(node, options=SettleModes(snd, Link.RCV_FIRST))
    for link in (receiver.link, sender.link):
        assert (link.remote_snd_settle_mode, link.remote_rcv_settle_mode) == (snd, Link.RCV_FIRST)


def test_a_deferred_message_returned_by_sequence_number_carries_its_lock_token_as_a_delivery_annotation(
        namespace, connection) -> None:
    """The Go SDK settles a deferred message with the token it reads from the message's delivery annotation
    `x-opt-lock-token`; the others read the reply's `lock-token`: both are there, the same uuid."""
    with ServiceBusClient.from_connection_string(namespace.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("later"))
        with client.get_queue_receiver("q", max_wait_time=5) as receiver:
            [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.defer_message(message)
    authorize(connection, namespace)
    node = "q/$management"
    body = {"sequence-numbers": Array(UNDESCRIBED, Data.LONG, message.sequence_number),
            "receiver-settle-mode": uint(1)}
    request_message = Message(id=uuid.uuid4(), body=body,
                              properties={"operation": "com.microsoft:receive-by-sequence-number"})
    form = forms(node)["receiver target (.NET, Go, JS $management)"]
    reply = request(connection, node, form, request_message)
    assert reply.properties["statusCode"] == 200
    [entry] = reply.body["messages"]
    deferred = Message()
    deferred.decode(entry["message"])
    assert deferred.instructions == {symbol("x-opt-lock-token"): entry["lock-token"]}
    assert isinstance(entry["lock-token"], uuid.UUID) and deferred.body == b"later"
