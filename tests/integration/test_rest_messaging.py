"""Service Bus's REST messaging on the management port, with plain HTTP(S) requests in the shapes Microsoft
Learn documents (Send Message, Send Message Batch, Peek-Lock, Receive and Delete, Unlock, Delete, Renew-Lock),
and the round trips between that door and AMQP with the real azure-servicebus SDK.

One broker (in memory) serves the module; each test uses its own entities.
"""

from __future__ import annotations

import http.client
import json
import resource
import selectors
import shutil
import socket
import ssl
import subprocess
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from urllib.parse import urlsplit

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from local_broker.auth import generate_sas_token
from local_broker.server import BrokerServer
from topology import parse

CURL = shutil.which("curl") or "curl"  # Debian's, on the machines that run these tests
ROOT_KEY = "cm9vdC1rZXktZm9yLXJlc3Q="
LISTEN_KEY, SEND_KEY = "bGlzdGVuLXJlc3Q=", "c2VuZC1yZXN0"
QUEUES = ["basic", "batch", "settle", "lost", "timeout", "large", "down", "polls", "from-rest", "from-amqp",
          "tls", "rights", "left", "scheduled", "curl", "named"]
TOPOLOGY = {"namespaces": {"rest": {
    "policies": {
        "RootManageSharedAccessKey": {"key": ROOT_KEY, "rights": ["Manage", "Send", "Listen"]},
        "listen-only": {"key": LISTEN_KEY, "rights": ["Listen"]},
        "send-only": {"key": SEND_KEY, "rights": ["Send"]},
    },
    "queues": {**{name: {} for name in QUEUES}, "dlq": {"max_delivery_count": 2},
               "sessions": {"requires_session": True}},
    "topics": {"orders": {"subscriptions": {"all": {}, "red": {"rules": {"red": {"filter": {
        "sql": "color = 'red'"}}}}}}},
}}}


@pytest.fixture(scope="module")
def broker():
    with BrokerServer(parse(TOPOLOGY)) as server:
        yield server


@pytest.fixture(scope="module")
def sdk(broker):
    with ServiceBusClient.from_connection_string(broker.namespaces["rest"].connection_string,
                                                 retry_total=0) as client:
        yield client


class Rest:
    """Plain HTTP requests to the namespace's management port, signed as a script would sign them."""

    def __init__(self, server: BrokerServer, tls: bool = False) -> None:
        self.server = server
        self.namespace = server.namespaces["rest"]
        self.port = self.namespace.admin_port
        self.tls = tls

    def token(self, name: str = "RootManageSharedAccessKey", key: str = ROOT_KEY, resource: str = "") -> str:
        scheme = "https" if self.tls else "http"
        return generate_sas_token(f"{scheme}://127.0.0.1:{self.port}/{resource}", name, key,
                                  int(time.time()) + 3600)

    def __call__(self, method: str, path: str, body: bytes = b"", token: str | None = None,
                 **headers: str) -> tuple[int, http.client.HTTPMessage, bytes]:
        if self.tls:
            context = ssl.create_default_context(cafile=self.server.cert_path)
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                "localhost", self.port, context=context, timeout=30)
        else:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = {"Authorization": self.token() if token is None else token}
        sent.update({name.replace("_", "-"): value for name, value in headers.items()})
        if not sent["Authorization"]:
            del sent["Authorization"]
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            return response.status, response.headers, response.read()
        finally:
            connection.close()


@pytest.fixture(scope="module")
def rest(broker):
    return Rest(broker)


def broker_properties(headers: http.client.HTTPMessage) -> dict:
    return json.loads(headers["BrokerProperties"])


def lock_path(headers: http.client.HTTPMessage) -> str:
    return urlsplit(headers["Location"]).path


# --- the operations, as documented ------------------------------------------------------------------------

def test_send_then_peek_lock_returns_body_broker_and_custom_properties(rest) -> None:
    sent = {"MessageId": "m-1", "Label": "M1", "CorrelationId": "c-1", "To": "dest", "ReplyTo": "back",
            "TimeToLive": 90}
    status, headers, body = rest("POST", "/basic/messages", b"This is a message.",
                                 BrokerProperties=json.dumps(sent), Priority="High", Customer='"12345,ABC"',
                                 Count="7", Ratio="0.5", Flag="true",
                                 Due='"Sun, 06 Nov 1994 08:49:37 GMT"', Content_Type="text/plain")
    assert (status, body) == (201, b"")
    status, headers, body = rest("POST", "/basic/messages/head?timeout=5")
    assert (status, body, headers["Content-Type"]) == (201, b"This is a message.", "text/plain")
    props = broker_properties(headers)
    assert {k: props[k] for k in sent} == sent
    assert props["DeliveryCount"] == 1 and props["SequenceNumber"] == props["EnqueuedSequenceNumber"] > 0
    assert props["State"] == "Active"
    locked_until = parsedate_to_datetime(props["LockedUntilUtc"])
    assert timedelta(seconds=50) < locked_until - parsedate_to_datetime(props["EnqueuedTimeUtc"]) \
        <= timedelta(seconds=61)
    # strings (and dates) come back quoted, numbers and booleans bare
    assert (headers["Priority"], headers["Customer"], headers["Count"], headers["Ratio"], headers["Flag"],
            headers["Due"]) == ('"High"', '"12345,ABC"', "7", "0.5", "true",
                                '"Sun, 06 Nov 1994 08:49:37 GMT"')
    assert headers["User-Agent"] is None  # HTTP's own headers are not properties
    location = lock_path(headers)
    assert location == f"/basic/messages/m-1/{props['LockToken']}"
    assert rest("POST", location)[0] == 200  # renew
    assert rest("DELETE", location)[0] == 200  # complete
    assert rest("POST", "/basic/messages/head?timeout=0")[0] == 204


def test_send_message_batch_and_receive_and_delete(rest) -> None:
    batch = [{"Body": "This is the first message", "UserProperties": {"Color": "Red"}},
             {"Body": "This is the second message", "UserProperties": {"Color": "Green", "n": 2}},
             {"Body": "This is the third message", "BrokerProperties": {"Label": "M3", "MessageId": "third"}}]
    status, _, _ = rest("POST", "/batch/messages", json.dumps(batch).encode(),
                        Content_Type="application/vnd.microsoft.servicebus.json")
    assert status == 201
    got = []
    for _ in batch:
        status, headers, body = rest("DELETE", "/batch/messages/head?timeout=5")
        assert status == 200 and headers["Location"] is None and "LockToken" not in broker_properties(headers)
        got.append((body, headers["Color"], broker_properties(headers).get("Label")))
    assert got == [(b"This is the first message", '"Red"', None),
                   (b"This is the second message", '"Green"', None),
                   (b"This is the third message", None, "M3")]
    assert rest("DELETE", "/batch/messages/head?timeout=0")[0] == 204


def test_unlock_returns_the_message_with_its_delivery_count_raised(rest) -> None:
    rest("POST", "/settle/messages", b"again")
    status, headers, _ = rest("POST", "/settle/messages/head?timeout=5")
    assert rest("PUT", lock_path(headers))[0] == 200
    status, headers, body = rest("POST", "/settle/messages/head?timeout=5")
    assert (status, body, broker_properties(headers)["DeliveryCount"]) == (201, b"again", 2)
    # the id segment may be the sequence number, as Learn allows
    props = broker_properties(headers)
    assert rest("DELETE", f"/settle/messages/{props['SequenceNumber']}/{props['LockToken']}")[0] == 200


def test_a_lost_lock_is_404_as_learn_documents_with_service_bus_detail(rest) -> None:
    rest("POST", "/lost/messages", b"x")
    _, headers, _ = rest("POST", "/lost/messages/head?timeout=5")
    location = lock_path(headers)
    assert rest("PUT", location)[0] == 200  # unlocked: the token is gone
    for method in ("DELETE", "PUT", "POST"):
        status, answer_headers, body = rest(method, location)
        assert status == 404
        assert body.startswith(b"<Error><Code>404</Code><Detail>The lock supplied is invalid.")
        assert answer_headers["Content-Type"] == "application/xml; charset=utf-8"


def test_the_lock_url_must_name_the_locked_message_by_id_or_sequence_number(rest) -> None:
    """Learn's Unlock, Delete and Renew-Lock: `/{queue}/messages/{MessageId|SequenceNumber}/{LockToken}`;
    a segment that names another message finds none (404, as a lost lock) and leaves the lock alone."""
    message_id = "order/7 of 9"  # a '/' and spaces: Location quotes it into one segment
    rest("POST", "/named/messages", b"x", BrokerProperties=json.dumps({"MessageId": message_id}))
    rest("POST", "/named/messages", b"y", BrokerProperties=json.dumps({"MessageId": "other"}))
    _, headers, _ = rest("POST", "/named/messages/head?timeout=5")
    _, other_headers, _ = rest("POST", "/named/messages/head?timeout=5")
    props, other = broker_properties(headers), broker_properties(other_headers)
    assert (props["MessageId"], other["MessageId"]) == (message_id, "other")
    token, sequence = props["LockToken"], props["SequenceNumber"]
    assert lock_path(headers) == f"/named/messages/order%2F7%20of%209/{token}"
    _, _, lost = rest("PUT", f"/named/messages/{sequence}/{uuid.uuid4()}")  # a lock that is not there
    assert lost.startswith(b"<Error><Code>404</Code><Detail>The lock supplied is invalid.")
    for wrong in ("other", str(other["SequenceNumber"]), "order", "order%2F7", "0"):
        for method in ("DELETE", "PUT", "POST"):
            status, answer_headers, body = rest(method, f"/named/messages/{wrong}/{token}")
            assert (status, body) == (404, lost)
            assert answer_headers["Content-Type"] == "application/xml; charset=utf-8"
    assert rest("POST", f"/named/messages/{sequence}/{token}")[0] == 200  # renew, by SequenceNumber
    assert rest("DELETE", lock_path(headers))[0] == 200  # complete, by MessageId: the lock was kept
    assert rest("DELETE", f"/named/messages/{other['SequenceNumber']}/{other['LockToken']}")[0] == 200
    assert rest("POST", "/named/messages/head?timeout=0")[0] == 204  # both completed, none redelivered


def test_a_long_poll_with_nothing_there_answers_204_after_its_timeout(rest) -> None:
    started = time.monotonic()
    status, _, body = rest("POST", "/timeout/messages/head?timeout=1")
    assert (status, body) == (204, b"") and time.monotonic() - started >= 0.9
    assert rest("DELETE", "/timeout/messages/head?timeout=0")[0] == 204


def test_a_connection_serves_on_after_its_long_poll(rest) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", rest.port, timeout=30)
    try:
        sockets = []
        for path in ("/timeout/messages/head?timeout=1", "/timeout/messages/head?timeout=0"):
            connection.request("POST", path, headers={"Authorization": rest.token()})
            response = connection.getresponse()
            assert (response.status, response.read()) == (204, b"")
            sockets.append(connection.sock)
        connection.request("POST", "/timeout/messages", body=b"same connection",
                           headers={"Authorization": rest.token()})
        assert connection.getresponse().status == 201
        assert sockets == [connection.sock] * 2  # one connection throughout (http.client would reconnect)
    finally:
        connection.close()
    assert rest("DELETE", "/timeout/messages/head?timeout=5")[2] == b"same connection"


def test_a_long_poll_gets_a_message_sent_while_it_waits(rest) -> None:
    result = {}
    poll = _in_background(result, rest, "POST", "/timeout/messages/head?timeout=30")
    time.sleep(0.3)
    assert rest("POST", "/timeout/messages", b"arrived")[0] == 201
    poll.join(10)
    status, headers, body = result["answer"]
    assert (status, body) == (201, b"arrived")
    assert rest("DELETE", lock_path(headers))[0] == 200


def test_https_on_the_same_port(broker) -> None:
    https = Rest(broker, tls=True)
    assert https("POST", "/tls/messages", b"secure")[0] == 201
    status, headers, body = https("POST", "/tls/messages/head?timeout=5")
    assert (status, body) == (201, b"secure") and headers["Location"].startswith("https://localhost:")
    assert https("DELETE", lock_path(headers))[0] == 200
    result = {}
    poll = _in_background(result, https, "POST", "/tls/messages/head?timeout=30")  # parked over TLS
    heads = broker._admins[0].messaging.heads
    _wait(lambda: broker.thread.call(lambda: heads.parked) == 1)
    assert https("POST", "/tls/messages", b"while parked")[0] == 201
    poll.join(10)
    status, headers, body = result["answer"]
    assert (status, body) == (201, b"while parked")
    assert https("DELETE", lock_path(headers))[0] == 200


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_curl_as_the_docs_use_it(broker, scheme) -> None:
    """curl (libcurl and OpenSSL: a client independent of Python's), the broker's certificate verified."""
    port = broker.namespaces["rest"].admin_port
    token = Rest(broker, tls=scheme == "https").token()
    base = f"{scheme}://localhost:{port}/curl/messages"

    def curl(method: str, url: str, *options: str) -> tuple[int, dict[str, str], bytes]:
        done = subprocess.run([CURL, "-s", "-i", "--cacert", broker.cert_path, "-X", method, url,
                               "-H", f"Authorization: {token}", *options], capture_output=True, timeout=30)
        head, _, body = done.stdout.partition(b"\r\n\r\n")
        status_line, *lines = head.decode().split("\r\n")
        return int(status_line.split()[1]), dict(line.split(": ", 1) for line in lines), body

    status, _, _ = curl("POST", base, "-H", 'BrokerProperties: {"Label": "M1", "MessageId": "m-1"}',
                        "-H", 'Priority: "High"', "-H", "Count: 7", "-H", "Content-Type: text/plain",
                        "--data-binary", "This is a message.")
    assert status == 201
    status, headers, body = curl("POST", f"{base}/head?timeout=10", "-H", "Content-Length: 0")
    assert (status, body) == (201, b"This is a message.")
    assert (headers["Priority"], headers["Count"]) == ('"High"', "7")
    assert headers["Location"].startswith(f"{scheme}://localhost:{port}/curl/messages/m-1/")
    assert curl("POST", headers["Location"], "-H", "Content-Length: 0")[0] == 200
    assert curl("DELETE", headers["Location"])[0] == 200
    assert curl("DELETE", f"{base}/head?timeout=0")[0] == 204


def test_subscriptions_receive_what_their_rules_let_through(rest) -> None:
    for color in ("red", "blue"):
        assert rest("POST", "/orders/messages", color.encode(), color=f'"{color}"')[0] == 201
    status, headers, body = rest("POST", "/orders/subscriptions/red/messages/head?timeout=5")
    assert (status, body) == (201, b"red")
    assert lock_path(headers).startswith("/orders/subscriptions/red/messages/")
    assert rest("DELETE", lock_path(headers))[0] == 200
    assert rest("POST", "/orders/subscriptions/red/messages/head?timeout=0")[0] == 204
    assert [rest("DELETE", "/orders/subscriptions/all/messages/head?timeout=5")[2] for _ in range(2)] == \
        [b"red", b"blue"]


def test_dead_lettering_at_max_delivery_count_is_shared_with_amqp(rest) -> None:
    rest("POST", "/dlq/messages", b"poison", BrokerProperties='{"MessageId": "poison"}')
    for _ in range(2):
        _, headers, _ = rest("POST", "/dlq/messages/head?timeout=5")
        assert rest("PUT", lock_path(headers))[0] == 200
    assert rest("POST", "/dlq/messages/head?timeout=0")[0] == 204
    status, headers, body = rest("DELETE", "/dlq/$DeadLetterQueue/messages/head?timeout=5")
    assert (status, body, headers["DeadLetterReason"]) == (200, b"poison", '"MaxDeliveryCountExceeded"')


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_a_client_that_left_its_long_poll_takes_no_message(broker, rest, tls) -> None:
    heads = broker._admins[0].messaging.heads
    client = socket.create_connection(("127.0.0.1", rest.port))
    if tls:
        context = ssl.create_default_context(cafile=broker.cert_path)
        client = context.wrap_socket(client, server_hostname="localhost")
    client.sendall(f"DELETE /left/messages/head?timeout=30 HTTP/1.1\r\nHost: localhost\r\n"
                   f"Authorization: {rest.token()}\r\n\r\n".encode())
    _wait(lambda: broker.thread.call(lambda: heads.parked) == 1)
    client.close()  # gone before any message: a receive-and-delete for it would lose the message
    assert rest("POST", "/left/messages", b"kept")[0] == 201
    assert rest("DELETE", "/left/messages/head?timeout=5")[2] == b"kept"
    assert broker.thread.call(lambda: heads.parked) == 0


# --- refusals ---------------------------------------------------------------------------------------------

def test_authorization_as_service_bus_answers_it(rest) -> None:
    assert rest("POST", "/rights/messages", b"x", token="")[0] == 401
    forged = rest.token(key="bm90LXRoZS1rZXk=")
    status, _, body = rest("POST", "/rights/messages", b"x", token=forged)
    assert status == 401 and b"InvalidSignature" in body
    listen = rest.token("listen-only", LISTEN_KEY)
    status, _, body = rest("POST", "/rights/messages", b"x", token=listen)
    assert status == 401 and b"'Send' claim(s) are required" in body
    send = rest.token("send-only", SEND_KEY)
    assert rest("POST", "/rights/messages", b"x", token=send)[0] == 201
    status, _, body = rest("POST", "/rights/messages/head?timeout=0", token=send)
    assert status == 401 and b"'Listen' claim(s) are required" in body
    assert rest("DELETE", "/rights/messages/head?timeout=5", token=listen)[2] == b"x"
    other_entity = rest.token(resource="basic")  # a token scoped to another entity
    assert rest("POST", "/rights/messages", b"x", token=other_entity)[0] == 401


def test_bad_requests_and_missing_entities(rest) -> None:
    status, _, body = rest("POST", "/basic/messages", b"x", BrokerProperties="{not json")
    assert status == 400 and b"BrokerProperties" in body
    status, _, body = rest("POST", "/basic/messages", b"x", BrokerProperties='{"TimeToLive": "soon"}')
    assert status == 400 and b"TimeToLive" in body
    batch = "application/vnd.microsoft.servicebus.json"
    assert rest("POST", "/basic/messages", b"[1]", Content_Type=batch)[0] == 400
    assert rest("POST", "/basic/messages/head?timeout=forever")[0] == 400
    assert rest("POST", "/nowhere/messages", b"x")[0] == 410  # Learn: the entity does not exist
    assert rest("POST", "/nowhere/messages/head?timeout=0")[0] == 410
    status, _, body = rest("POST", "/orders/messages/head?timeout=0")
    assert status == 400 and b"subscriptions" in body  # a topic is not received from
    status, _, body = rest("POST", "/sessions/messages/head?timeout=0")
    assert status == 400 and b"session" in body.lower()


def test_console_and_control_paths_are_not_messaging_routes(rest) -> None:
    for path in ("/$console/entity/q/messages", "/$control/q/messages"):
        status, headers, _ = rest("POST", path, b"x")
        assert status != 201 and headers["Content-Type"] != "application/xml; charset=utf-8", path


def test_a_message_over_the_entity_limit_is_403_as_learn_documents(rest) -> None:
    status, _, body = rest("POST", "/large/messages", b"x" * (300 * 1024))  # the queue takes 256 KB
    assert status == 403 and b"<Error><Code>403</Code>" in body and b"size" in body.lower()
    assert rest("POST", "/large/messages", b"x" * (200 * 1024))[0] == 201


def test_a_down_namespace_answers_503_and_ends_parked_polls(broker, rest) -> None:
    faults = broker.namespaces["rest"].faults
    result = {}
    poll = _in_background(result, rest, "POST", "/down/messages/head?timeout=30")
    heads = broker._admins[0].messaging.heads
    _wait(lambda: broker.thread.call(lambda: heads.parked) == 1)
    faults.set({"namespace_down": "refuse"})
    try:
        poll.join(10)
        assert result["answer"][0] == 503
        status, _, body = rest("POST", "/down/messages", b"x")
        assert status == 503 and b"unavailable" in body
    finally:
        faults.set({"namespace_down": None})
    assert rest("POST", "/down/messages", b"x")[0] == 201


# --- one engine, two doors ----------------------------------------------------------------------------------

def test_a_rest_message_reads_the_same_over_amqp(rest, sdk) -> None:
    props = {"MessageId": "r-1", "Label": "subj", "CorrelationId": "c", "To": "to", "ReplyTo": "rt",
             "TimeToLive": 120}
    rest("POST", "/from-rest/messages", b"\x00binary\xff", BrokerProperties=json.dumps(props),
         Content_Type="application/octet-stream", text='"hello"', bare="plain", number="42", ratio="2.5",
         flag="false", when='"Wed, 02 Jul 2014 01:32:27 GMT"')
    with sdk.get_queue_receiver("from-rest", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_wait_time=5)
        assert b"".join(message.body) == b"\x00binary\xff"
        assert (message.message_id, message.subject, message.correlation_id, message.to, message.reply_to,
                message.content_type, message.time_to_live) == (
            "r-1", "subj", "c", "to", "rt", "application/octet-stream", timedelta(seconds=120))
        properties = {k.decode() if isinstance(k, bytes) else k: v
                      for k, v in message.application_properties.items()}
        properties = {k: v.decode() if isinstance(v, bytes) else v for k, v in properties.items()}
        # a date travels as an AMQP timestamp, which this SDK reads as milliseconds since 1970
        stamp = int(datetime(2014, 7, 2, 1, 32, 27, tzinfo=UTC).timestamp() * 1000)
        assert properties == {"text": "hello", "bare": "plain", "number": 42, "ratio": 2.5, "flag": False,
                              "when": stamp}
        receiver.abandon_message(message)
    # the abandon over AMQP counts as a delivery the REST door sees
    _, headers, _ = rest("POST", "/from-rest/messages/head?timeout=5")
    assert broker_properties(headers)["DeliveryCount"] == 2
    assert rest("DELETE", lock_path(headers))[0] == 200


def test_an_amqp_message_reads_the_same_over_rest(rest, sdk) -> None:
    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    with sdk.get_queue_sender("from-amqp") as sender:
        sender.send_messages(ServiceBusMessage(
            b"from the sdk", message_id="a-1", subject="s", correlation_id="c", content_type="text/plain",
            application_properties={"color": "red", "n": 3, "ok": True, "when": when},
            time_to_live=timedelta(minutes=5)))
    status, headers, body = rest("POST", "/from-amqp/messages/head?timeout=5")
    assert (status, body, headers["Content-Type"]) == (201, b"from the sdk", "text/plain")
    props = broker_properties(headers)
    assert (props["MessageId"], props["Label"], props["CorrelationId"], props["TimeToLive"]) == \
        ("a-1", "s", "c", 300)
    assert (headers["color"], headers["n"], headers["ok"], headers["when"]) == \
        ('"red"', "3", "true", '"Mon, 06 May 2024 07:08:09 GMT"')
    assert rest("PUT", lock_path(headers))[0] == 200  # unlocked over REST: the SDK sees the delivery counted
    with sdk.get_queue_receiver("from-amqp", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_wait_time=5)
        assert message.delivery_count == 1
        receiver.complete_message(message)
    with sdk.get_queue_receiver("from-amqp", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver:
        assert receiver.peek_messages(1) == []


def test_a_rest_lock_is_settled_over_amqp_and_the_other_way(rest, sdk) -> None:
    rest("POST", "/from-amqp/messages", b"one")
    _, headers, _ = rest("POST", "/from-amqp/messages/head?timeout=5")
    with sdk.get_queue_receiver("from-amqp", max_wait_time=1) as receiver:
        assert receiver.receive_messages(max_wait_time=1) == []  # locked by the REST receiver
        assert rest("DELETE", lock_path(headers))[0] == 200
        rest("POST", "/from-amqp/messages", b"two")
        (message,) = receiver.receive_messages(max_wait_time=5)
        assert rest("POST", "/from-amqp/messages/head?timeout=0")[0] == 204  # locked by the SDK
        receiver.complete_message(message)


def test_a_scheduled_rest_message_waits_for_its_time(rest, sdk) -> None:
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    stamp = format_datetime(when, usegmt=True)
    assert rest("POST", "/scheduled/messages", b"later",
                BrokerProperties=json.dumps({"ScheduledEnqueueTimeUtc": stamp}))[0] == 201
    assert rest("POST", "/scheduled/messages/head?timeout=0")[0] == 204
    with sdk.get_queue_receiver("scheduled") as receiver:
        (peeked,) = receiver.peek_messages(1)
        assert (b"".join(peeked.body), peeked.scheduled_enqueue_time_utc) == (b"later", when)


def test_a_session_id_sent_over_rest_reaches_a_session_receiver(rest, sdk) -> None:
    rest("POST", "/sessions/messages", b"in a session", BrokerProperties='{"SessionId": "s-1"}')
    with sdk.get_queue_receiver("sessions", session_id="s-1", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_wait_time=5)
        assert (message.session_id, b"".join(message.body)) == ("s-1", b"in a session")
        receiver.complete_message(message)


# --- long polls hold no thread ------------------------------------------------------------------------------

def test_a_thousand_long_polls_are_parked_without_a_thread_each(broker, rest) -> None:
    polls = 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # both ends of each poll are in this process
    assert hard >= 3 * polls, f"1,000 polls need {3 * polls} open files here; the hard limit is {hard}"
    if soft < 4 * polls:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * polls), hard))
    heads = broker._admins[0].messaging.heads
    before = threading.active_count()
    request = (f"POST /polls/messages/head?timeout=60 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Authorization: {rest.token()}\r\nContent-Length: 0\r\n\r\n").encode()
    selector = selectors.DefaultSelector()
    sockets = []
    try:
        for _ in range(polls):
            client = socket.create_connection(("127.0.0.1", rest.port))
            client.sendall(request)
            client.setblocking(False)
            selector.register(client, selectors.EVENT_READ, bytearray())
            sockets.append(client)
        _wait(lambda: broker.thread.call(lambda: heads.parked) == polls)
        _wait(lambda: threading.active_count() < before + 20)  # the request threads have ended
        parked_threads = threading.active_count()
        batch = [{"Body": f"m{i}"} for i in range(polls)]
        assert rest("POST", "/polls/messages", json.dumps(batch).encode(),
                    Content_Type="application/vnd.microsoft.servicebus.json")[0] == 201
        answers = _read_answers(selector, polls)
    finally:
        for client in sockets:
            client.close()
        selector.close()
    assert parked_threads < before + 20
    assert sorted(answers) == sorted(f"m{i}".encode() for i in range(polls))
    assert rest("POST", "/polls/messages/head?timeout=0")[0] == 204


def _read_answers(selector: selectors.BaseSelector, count: int) -> list[bytes]:
    """The bodies of `count` answers read from the registered sockets (each 201 with a short body)."""
    bodies: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(bodies) < count and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=1):
            buffer: bytearray = key.data
            chunk = key.fileobj.recv(65536)  # type: ignore[union-attr]
            buffer += chunk
            head, _, body = bytes(buffer).partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), None)
            if length is not None and len(body) >= length:
                assert head.startswith(b"HTTP/1.1 201 ")
                bodies.append(body[:length])
                selector.unregister(key.fileobj)
            elif not chunk:
                selector.unregister(key.fileobj)
    return bodies


def _in_background(result: dict, rest: Rest, *request: str) -> threading.Thread:
    """A request made on a thread of its own; its answer lands in `result["answer"]`."""
    thread = threading.Thread(target=lambda: result.update(answer=rest(*request)))
    thread.start()
    return thread


def _wait(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        time.sleep(0.05)
