"""The management endpoint driven by the real ServiceBusAdministrationClient over HTTPS.

The endpoint runs in-process on an ephemeral loopback port with its generated certificate, which the
client verifies (`connection_verify=<cert>`). The engine is called directly from the HTTP threads under a
lock — the synchronous stand-in for the broker's reactor thread.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
    ServiceRequestError,
)
from azure.servicebus.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

from local_broker.auth import DEFAULT_POLICY_NAME, SEND, NamespaceAuth, SharedAccessPolicy, generate_sas_token
from local_broker.engine import (
    TIMESPAN_MAX,
    Message,
    Namespace,
    NamespaceConfig,
    QueueProperties,
    ReceiveMode,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.faults import NamespaceFaults
from local_broker.tls import ensure_certificate
from local_broker.wire.admin.server import AdminServer

ROOT = SharedAccessPolicy(DEFAULT_POLICY_NAME, "root-key-for-tests")
SENDER = SharedAccessPolicy("sender", "sender-key-for-tests", frozenset({SEND}))


@dataclass
class Endpoint:
    """A running management endpoint over one engine namespace."""

    namespace: Namespace
    server: AdminServer
    faults: NamespaceFaults
    cert_path: str
    lock: threading.Lock

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def connection_string(
        self, policy: SharedAccessPolicy = ROOT, key: str | None = None, host: str = "127.0.0.1"
    ) -> str:
        return (
            f"Endpoint=sb://{host}:{self.server.port};SharedAccessKeyName={policy.name};"
            f"SharedAccessKey={key or policy.key}"
        )

    def client(
        self, policy: SharedAccessPolicy = ROOT, key: str | None = None, **options
    ) -> ServiceBusAdministrationClient:
        return ServiceBusAdministrationClient.from_connection_string(
            self.connection_string(policy, key), connection_verify=self.cert_path, retry_total=0, **options
        )

    def engine(self, fn):
        """Run `fn(namespace)` as the endpoint does (one caller at a time)."""
        with self.lock:
            return fn(self.namespace)

    def raw(self, method: str, path: str, body: bytes | None = None, token: str | None = None,
            tls: bool = True, **extra_headers: str) -> tuple[int, bytes]:
        """A hand-made request, for what the SDK cannot send (no token, JSON control calls, plain HTTP)."""
        scheme = "https" if tls else "http"
        headers = {"Authorization": token, **extra_headers} if token else extra_headers
        request = urllib.request.Request(
            f"{scheme}://{self.address}{path}", data=body, method=method, headers=headers
        )
        context = ssl.create_default_context(cafile=self.cert_path) if tls else None
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def token(self, policy: SharedAccessPolicy = ROOT, lifetime: int = 3600) -> str:
        expiry = int(time.time()) + lifetime
        return generate_sas_token(f"https://{self.address}", policy.name, policy.key, expiry)


@pytest.fixture(scope="session")
def certificate(tmp_path_factory):
    return ensure_certificate(tmp_path_factory.mktemp("broker-data"))


@pytest.fixture
def endpoint(certificate):
    namespace = Namespace(NamespaceConfig(name="primary"))
    lock = threading.Lock()
    faults = NamespaceFaults()

    def run_on_engine(fn):
        with lock:
            return fn(namespace)

    server = AdminServer(
        "primary",
        "127.0.0.1",
        0,
        str(certificate.cert_path),
        str(certificate.key_path),
        NamespaceAuth([ROOT, SENDER]),
        run_on_engine,
        faults,
    )
    server.start()
    try:
        yield Endpoint(namespace, server, faults, str(certificate.cert_path), lock)
    finally:
        server.stop()


def send(endpoint: Endpoint, path: str, count: int, **fields) -> None:
    endpoint.engine(lambda ns: ns.send(path, [Message(body=b"payload", **fields) for _ in range(count)]))


# --- queues -------------------------------------------------------------------------------------------

QUEUE_OPTIONS = {
    "lock_duration": timedelta(seconds=30),
    "max_size_in_megabytes": 2048,
    "requires_duplicate_detection": True,
    "requires_session": False,
    "default_message_time_to_live": timedelta(days=1),
    "dead_lettering_on_message_expiration": True,
    "duplicate_detection_history_time_window": timedelta(minutes=10),
    "max_delivery_count": 5,
    "enable_batched_operations": False,
    "enable_partitioning": True,
    "forward_to": "orders-archive",
    "forward_dead_lettered_messages_to": "orders-dlq",
    "user_metadata": "owner=billing",
}


def returned(endpoint: Endpoint, attribute: str, value):
    """What the service answers for an option: forwarding destinations as `sb://<namespace>/<entity>`."""
    forwarding = attribute in ("forward_to", "forward_dead_lettered_messages_to")
    return f"sb://{endpoint.address}/{value}" if forwarding else value


def test_queue_create_get_update_list_delete_round_trips_every_property(endpoint):
    admin = endpoint.client()
    admin.create_queue("orders-archive", auto_delete_on_idle=timedelta(hours=1))
    admin.create_queue("orders-dlq")
    created = admin.create_queue("orders", auto_delete_on_idle=timedelta(hours=1), **QUEUE_OPTIONS)
    fetched = admin.get_queue("orders")
    for props in (created, fetched):
        assert props.name == "orders"
        for attribute, value in QUEUE_OPTIONS.items():
            assert getattr(props, attribute) == returned(endpoint, attribute, value), attribute
        assert props.status == "Active" and props.availability_status == "Available"
        assert props.auto_delete_on_idle >= TIMESPAN_MAX  # a forwarding source never auto-deletes
    assert admin.get_queue("orders-archive").auto_delete_on_idle == timedelta(hours=1)

    fetched.max_delivery_count = 7
    fetched.forward_to = None  # the SDK then leaves ForwardTo out: unset
    fetched.status = "SendDisabled"
    fetched.user_metadata = "owner=payments"
    fetched.default_message_time_to_live = TIMESPAN_MAX
    admin.update_queue(fetched)
    updated = admin.get_queue("ORDERS")  # names are case-insensitive
    assert (updated.max_delivery_count, updated.forward_to, updated.status, updated.user_metadata) == (
        7,
        None,
        "SendDisabled",
        "owner=payments",
    )
    assert updated.forward_dead_lettered_messages_to == f"sb://{endpoint.address}/orders-dlq"
    assert updated.default_message_time_to_live >= TIMESPAN_MAX
    assert updated.lock_duration == timedelta(seconds=30)

    assert [q.name for q in admin.list_queues()] == ["orders", "orders-archive", "orders-dlq"]
    admin.delete_queue("orders")
    with pytest.raises(ResourceNotFoundError):
        admin.get_queue("orders")
    assert [q.name for q in admin.list_queues()] == ["orders-archive", "orders-dlq"]


def test_queue_defaults_and_sessions(endpoint):
    admin = endpoint.client()
    plain = admin.create_queue("plain")
    assert plain.lock_duration == timedelta(minutes=1) and plain.max_delivery_count == 10
    assert plain.default_message_time_to_live >= TIMESPAN_MAX and plain.auto_delete_on_idle >= TIMESPAN_MAX
    assert plain.duplicate_detection_history_time_window == timedelta(minutes=10)
    assert plain.requires_session is False and plain.enable_partitioning is False
    assert plain.max_message_size_in_kilobytes == 256
    assert admin.create_queue("sessions", requires_session=True).requires_session is True
    assert admin.get_queue("sessions").requires_session is True


def test_queue_runtime_properties_count_what_the_engine_holds(endpoint):
    admin = endpoint.client()
    admin.create_queue("work")
    send(endpoint, "work", 3)
    send(endpoint, "work", 2, scheduled_enqueue_time=time.time() + 3600)

    def dead_letter_one(ns):
        [message] = ns.receive("work", 1, ReceiveMode.PEEK_LOCK)
        ns.dead_letter("work", [message.lock_token], reason="test")

    endpoint.engine(dead_letter_one)
    runtime = admin.get_queue_runtime_properties("work")
    assert (
        runtime.active_message_count,
        runtime.dead_letter_message_count,
        runtime.scheduled_message_count,
        runtime.total_message_count,
    ) == (2, 1, 2, 5)
    assert runtime.transfer_message_count == 0 and runtime.transfer_dead_letter_message_count == 0
    assert runtime.size_in_bytes > 0 and runtime.created_at_utc is not None
    [listed] = admin.list_queues_runtime_properties()
    assert (listed.name, listed.active_message_count) == ("work", 2)


# --- topics and subscriptions -------------------------------------------------------------------------

TOPIC_OPTIONS = {
    "default_message_time_to_live": timedelta(days=2),
    "max_size_in_megabytes": 3072,
    "requires_duplicate_detection": True,
    "duplicate_detection_history_time_window": timedelta(minutes=30),
    "enable_batched_operations": True,
    "support_ordering": False,
    "auto_delete_on_idle": timedelta(days=3),
    "enable_partitioning": True,
    "user_metadata": "events",
}
SUBSCRIPTION_OPTIONS = {
    "lock_duration": timedelta(seconds=45),
    "requires_session": False,
    "default_message_time_to_live": timedelta(hours=6),
    "dead_lettering_on_message_expiration": True,
    "dead_lettering_on_filter_evaluation_exceptions": False,
    "max_delivery_count": 3,
    "enable_batched_operations": False,
    "forward_to": "sink",
    "forward_dead_lettered_messages_to": "sink-dlq",
    "user_metadata": "to-secondary",
}


def test_topic_and_subscription_round_trip_every_property(endpoint):
    admin = endpoint.client()
    topic = admin.create_topic("events", **TOPIC_OPTIONS)
    for props in (topic, admin.get_topic("events")):
        for attribute, value in TOPIC_OPTIONS.items():
            assert getattr(props, attribute) == value, attribute
    admin.create_queue("sink")
    admin.create_queue("sink-dlq")
    created = admin.create_subscription("events", "replicate", **SUBSCRIPTION_OPTIONS)
    for props in (created, admin.get_subscription("events", "replicate")):
        assert props.name == "replicate"
        for attribute, value in SUBSCRIPTION_OPTIONS.items():
            assert getattr(props, attribute) == returned(endpoint, attribute, value), attribute

    sub = admin.get_subscription("events", "replicate")
    sub.max_delivery_count = 9
    sub.status = "ReceiveDisabled"
    sub.forward_to = None
    admin.update_subscription("events", sub)
    updated = admin.get_subscription("events", "replicate")
    assert (updated.max_delivery_count, updated.status, updated.forward_to) == (9, "ReceiveDisabled", None)

    topic = admin.get_topic("events")
    topic.status = "SendDisabled"
    topic.user_metadata = None
    admin.update_topic(topic)
    topic = admin.get_topic("events")
    assert (topic.status, topic.user_metadata) == ("SendDisabled", None)

    admin.create_subscription("events", "audit", requires_session=True)
    assert [s.name for s in admin.list_subscriptions("events")] == ["audit", "replicate"]
    assert [t.name for t in admin.list_topics()] == ["events"]
    admin.delete_subscription("events", "audit")
    with pytest.raises(ResourceNotFoundError):
        admin.get_subscription("events", "audit")
    admin.delete_topic("events")
    with pytest.raises(ResourceNotFoundError):
        admin.get_topic("events")


def test_topic_and_subscription_runtime_properties(endpoint):
    admin = endpoint.client()
    admin.create_topic("news")
    admin.create_subscription("news", "a")
    admin.create_subscription("news", "b")
    send(endpoint, "news", 2)
    send(endpoint, "news", 1, scheduled_enqueue_time=time.time() + 3600)
    runtime = admin.get_topic_runtime_properties("news")
    assert runtime.subscription_count == 2 and runtime.scheduled_message_count >= 1
    sub = admin.get_subscription_runtime_properties("news", "a")
    assert sub.active_message_count == 2 and sub.total_message_count >= 2
    listed = admin.list_subscriptions_runtime_properties("news")
    assert [(s.name, s.active_message_count) for s in listed] == [("a", 2), ("b", 2)]
    assert [t.name for t in admin.list_topics_runtime_properties()] == ["news"]


# --- rules --------------------------------------------------------------------------------------------


def test_rules_of_every_kind(endpoint):
    admin = endpoint.client()
    admin.create_topic("t1")
    admin.create_subscription("t1", "s1")
    [default] = admin.list_rules("t1", "s1")
    assert default.name == "$Default" and isinstance(default.filter, TrueRuleFilter)
    assert default.action is None

    admin.create_rule(
        "t1",
        "s1",
        "sql",
        filter=SqlRuleFilter("color = @c AND size > @n", parameters={"@c": "red", "@n": 2}),
        action=SqlRuleAction("SET replicated = 'yes'"),
    )
    properties = {
        "k": "v",
        "n": 5,
        "b": True,
        "f": 1.5,
        "d": datetime(2024, 1, 1, tzinfo=UTC),
        "td": timedelta(seconds=5),
    }
    admin.create_rule(
        "t1",
        "s1",
        "correlation",
        filter=CorrelationRuleFilter(
            correlation_id="cid",
            message_id="mid",
            to="to",
            reply_to="rt",
            label="lbl",
            session_id="sess",
            reply_to_session_id="rts",
            content_type="ct",
            properties=properties,
        ),
    )
    admin.create_rule("t1", "s1", "never", filter=FalseRuleFilter())

    sql = admin.get_rule("t1", "s1", "sql")
    assert isinstance(sql.filter, SqlRuleFilter) and sql.filter.sql_expression == "color = @c AND size > @n"
    assert sql.filter.parameters == {"@c": "red", "@n": 2}
    assert isinstance(sql.action, SqlRuleAction) and sql.action.sql_expression == "SET replicated = 'yes'"
    assert sql.created_at_utc is not None
    corr = admin.get_rule("t1", "s1", "correlation").filter
    assert isinstance(corr, CorrelationRuleFilter) and corr.properties == properties
    fields = (
        corr.correlation_id,
        corr.message_id,
        corr.to,
        corr.reply_to,
        corr.label,
        corr.session_id,
        corr.reply_to_session_id,
        corr.content_type,
    )
    assert fields == ("cid", "mid", "to", "rt", "lbl", "sess", "rts", "ct")
    assert isinstance(admin.get_rule("t1", "s1", "never").filter, FalseRuleFilter)
    assert sorted(r.name for r in admin.list_rules("t1", "s1")) == ["$Default", "correlation", "never", "sql"]

    sql.filter = SqlRuleFilter("color = 'blue'")
    sql.action = None
    admin.update_rule("t1", "s1", sql)
    changed = admin.get_rule("t1", "s1", "sql")
    assert changed.filter.sql_expression == "color = 'blue'" and changed.action is None

    admin.delete_rule("t1", "s1", "$Default")
    with pytest.raises(ResourceNotFoundError):
        admin.get_rule("t1", "s1", "$Default")


def test_a_rule_decides_what_a_subscription_receives(endpoint):
    admin = endpoint.client()
    admin.create_topic("orders")
    admin.create_subscription("orders", "red")
    admin.delete_rule("orders", "red", "$Default")
    admin.create_rule("orders", "red", "only-red", filter=SqlRuleFilter("color = 'red'"))
    send(endpoint, "orders", 1, application_properties={"color": "red"})
    send(endpoint, "orders", 2, application_properties={"color": "blue"})
    assert admin.get_subscription_runtime_properties("orders", "red").active_message_count == 1


# --- paging, namespace, transport -----------------------------------------------------------------------


def test_lists_page_past_one_hundred(endpoint):
    names = [f"q{i:03d}" for i in range(105)]

    def create_many(ns):
        for name in names:
            ns.create_queue(QueueProperties(name=name))
        ns.create_topic(TopicProperties(name="t"))
        for i in range(130):
            ns.create_subscription("t", SubscriptionProperties(name=f"s{i:03d}"))

    endpoint.engine(create_many)
    admin = endpoint.client()
    assert [q.name for q in admin.list_queues()] == names
    assert len(list(admin.list_queues_runtime_properties())) == 105
    assert [s.name for s in admin.list_subscriptions("t")] == [f"s{i:03d}" for i in range(130)]
    status, body = endpoint.raw(
        "GET", "/$Resources/queues?$skip=100&$top=100&api-version=2021-05", token=endpoint.token()
    )
    assert status == 200 and body.count(b"<entry") == 5 and b'rel="next"' not in body


def test_namespace_properties(endpoint):
    props = endpoint.client().get_namespace_properties()
    assert (props.name, props.messaging_sku, props.namespace_type) == ("primary", "Standard", "Messaging")
    assert props.created_at_utc is not None


def test_certificate_names_localhost_and_is_required(endpoint):
    by_name = ServiceBusAdministrationClient.from_connection_string(
        endpoint.connection_string(host="localhost"), connection_verify=endpoint.cert_path, retry_total=0
    )
    by_name.create_queue("via-localhost")
    unverified = ServiceBusAdministrationClient.from_connection_string(
        endpoint.connection_string(), retry_total=0
    )
    with pytest.raises(ServiceRequestError, match="CERTIFICATE_VERIFY_FAILED"):
        unverified.get_queue("via-localhost")


def test_health_answers_plain_http_and_https(endpoint):
    for tls in (False, True):
        status, body = endpoint.raw("GET", "/health", tls=tls)
        assert status == 200 and json.loads(body) == {
            "status": "ok",
            "namespace": "primary",
            "namespace_down": None,
        }


# --- errors -------------------------------------------------------------------------------------------


def test_not_found_and_conflict(endpoint):
    admin = endpoint.client()
    for call in (
        lambda: admin.get_queue("missing"),
        lambda: admin.get_topic("missing"),
        lambda: admin.delete_queue("missing"),
        lambda: admin.get_subscription("missing", "s"),
        lambda: admin.create_subscription("missing", "s"),
        lambda: admin.get_rule("missing", "s", "r"),
        lambda: admin.get_queue_runtime_properties("missing"),
    ):
        with pytest.raises(ResourceNotFoundError):
            call()
    admin.create_queue("taken")
    with pytest.raises(ResourceExistsError, match="SubCode=40900"):
        admin.create_queue("taken")
    with pytest.raises(ResourceExistsError):
        admin.create_topic("TAKEN")  # queues and topics share one name space
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    with pytest.raises(ResourceExistsError):
        admin.create_subscription("t", "s")
    with pytest.raises(ResourceExistsError):
        admin.create_rule("t", "s", "$Default")


def test_bad_property_and_bad_filter_are_400_with_the_reason(endpoint):
    admin = endpoint.client()
    with pytest.raises(HttpResponseError) as caught:
        admin.create_queue("q", lock_duration=timedelta(minutes=10))
    assert caught.value.status_code == 400 and "LockDuration" in caught.value.message
    with pytest.raises(HttpResponseError) as caught:
        admin.create_queue("q", max_delivery_count=0)
    assert caught.value.status_code == 400 and "MaxDeliveryCount" in caught.value.message
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    with pytest.raises(HttpResponseError) as caught:
        admin.create_rule("t", "s", "broken", filter=SqlRuleFilter("color = = 'red'"))
    assert caught.value.status_code == 400 and caught.value.message
    with pytest.raises(HttpResponseError) as caught:
        admin.create_rule("t", "s", "broken", filter=SqlRuleFilter("a = 1"), action=SqlRuleAction("SET"))
    assert caught.value.status_code == 400
    with pytest.raises(HttpResponseError) as caught:
        admin.create_queue("forwarder", forward_to="nowhere")
    assert caught.value.status_code in (400, 404) and "nowhere" in caught.value.message


def test_create_only_properties_cannot_change(endpoint):
    admin = endpoint.client()
    admin.create_queue("fixed")
    queue = admin.get_queue("fixed")
    queue.requires_session = True
    with pytest.raises(HttpResponseError) as caught:
        admin.update_queue(queue)
    assert caught.value.status_code == 400


def test_unauthorized(endpoint):
    with pytest.raises(ClientAuthenticationError):
        endpoint.client(key="wrong-key").list_queues().next()
    with pytest.raises(ClientAuthenticationError):
        endpoint.client(policy=SENDER).create_queue("q")  # Send is not Manage
    expired = generate_sas_token(f"https://{endpoint.address}", ROOT.name, ROOT.key, int(time.time()) - 10)
    status, body = endpoint.raw("GET", "/$namespaceinfo", token=expired)
    assert status == 401 and b"expired" in body
    with_token = ServiceBusAdministrationClient.from_connection_string(  # sends "Bearer <SAS token>"
        f"Endpoint=sb://{endpoint.address};SharedAccessSignature={endpoint.token()}",
        connection_verify=endpoint.cert_path,
        retry_total=0,
    )
    assert with_token.get_namespace_properties().name == "primary"
    status, body = endpoint.raw("GET", "/$Resources/queues")
    assert status == 401 and b"<Code>401</Code>" in body
    scoped = generate_sas_token(
        f"https://{endpoint.address}/other", ROOT.name, ROOT.key, int(time.time()) + 60
    )
    assert endpoint.raw("PUT", "/q1", b"<entry/>", token=scoped)[0] == 401  # a token for another entity


def test_forwarding_needs_the_supplementary_token(endpoint):
    endpoint.client().create_queue("target")
    entry = (
        b'<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">'
        b'<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">'
        b"<ForwardTo>sb://127.0.0.1/target</ForwardTo></QueueDescription></content></entry>"
    )
    status, body = endpoint.raw("PUT", "/source", entry, token=endpoint.token())
    assert status == 401 and b"ServiceBusSupplementaryAuthorization" in body
    expiry = int(time.time()) + 60
    for destination, expected in (("elsewhere", 401), ("target", 201)):
        audience = f"sb://{endpoint.address}/{destination}"
        supplementary = generate_sas_token(audience, ROOT.name, ROOT.key, expiry)
        status, _ = endpoint.raw("PUT", "/source", entry, token=endpoint.token(),
                                 ServiceBusSupplementaryAuthorization=supplementary)
        assert status == expected


def test_request_bodies_need_a_sane_length(endpoint):
    cases = (({"Content-Length": str(2 << 20)}, 413), ({"Transfer-Encoding": "chunked"}, 411),
             ({"Content-Length": "many"}, 400))
    for headers, expected in cases:
        connection = http.client.HTTPConnection("127.0.0.1", endpoint.server.port, timeout=10)
        connection.putrequest("PUT", "/q1")
        for name, value in {"Authorization": endpoint.token(), **headers}.items():
            connection.putheader(name, value)
        connection.endheaders()
        assert connection.getresponse().status == expected
        connection.close()
