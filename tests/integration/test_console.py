"""The web console of `sbfed broker serve` over HTTP: sign-in, pages with what the SDK sent, and the
actions each key's rights allow (a Listen-only key peeks but cannot purge, resubmit, send or take the
namespace down)."""

from __future__ import annotations

import http.cookiejar
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusConnectionError, ServiceBusError
from azure.servicebus.management import ServiceBusAdministrationClient

from local_broker.server import BrokerServer
from tests.broker_process import ServeProcess
from tests.console_client import ConsoleClient, served_namespace

LISTENER_KEY = "bGlzdGVuLW9ubHkta2V5"
TOPOLOGY = {"namespaces": {"primary": {
    "policies": {"RootManageSharedAccessKey": {"key": "U0FTX0tFWV9WQUxVRQ==", "rights": ["Manage", "Send",
                                                                                         "Listen"]},
                 "reader": {"key": LISTENER_KEY, "rights": ["Listen"]}},
    "queues": {"orders": {}, "audit": {}, "sharded": {"enable_partitioning": True},
               "carts": {"requires_session": True}},
    "topics": {"events": {"subscriptions": {"all": {"forward_to": "audit"}}}},
}}}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with served_namespace(TOPOLOGY, tmp_path_factory.mktemp("console")) as entry:
        yield entry


def _base(entry: dict[str, Any]) -> str:
    return f"http://127.0.0.1:{entry['admin_port']}"


def _manager(entry: dict[str, Any]) -> ConsoleClient:
    client = ConsoleClient(_base(entry))
    key = re.search(r"SharedAccessKey=([^;]+)", entry["connection_string"]).group(1)
    assert client.sign_in("RootManageSharedAccessKey", key).status == 200
    return client


def _row(client: ConsoleClient, entity: str) -> list[int]:
    """The counts of an entity's row in the refreshed fragment: active, DLQ, TDLQ, scheduled, deferred."""
    fragment = client.get("/$console/fragments/entities")
    assert fragment.status == 200
    row = re.search(rf'<tr data-entity="{re.escape(entity)}".*?</tr>', fragment.html).group(0)
    return [int(n) for n in re.findall(r"<td class='n(?: hot)?'>(\d+)</td>", row)][:5]


def _send(entry: dict[str, Any], queue: str, *messages: ServiceBusMessage, **options: Any) -> None:
    with ServiceBusClient.from_connection_string(entry["connection_string"], **options) as sb, \
            sb.get_queue_sender(queue) as sender:
        sender.send_messages(list(messages))


def test_nothing_but_health_without_signing_in(broker: dict[str, Any]) -> None:
    client = ConsoleClient(_base(broker))
    assert client.get("/health").status == 200
    for path in ("/", "/$console/", "/$console/fragments/entities", "/$console/entity/orders"):
        page = client.get(path)
        assert page.url.endswith("/$console/login") and "Sign in" in page.html, path
        assert "orders" not in page.html
    refused = client.post("/$console/faults", {"namespace_down": "drop"}, "guess")
    assert refused.url.endswith("/$console/login")
    wrong = client.sign_in("RootManageSharedAccessKey", "bm90LXRoZS1rZXk=")
    assert wrong.status == 401 and "invalid policy name or key" in wrong.html
    client.jar.set_cookie(_cookie("sbfed-console-primary", "forged"))
    assert client.get("/$console/").url.endswith("/$console/login")


def _cookie(name: str, value: str) -> http.cookiejar.Cookie:
    return http.cookiejar.Cookie(0, name, value, None, False, "127.0.0.1", False, False, "/", True, False,
                                 None, False, None, None, {})


def test_serve_prints_each_namespace_login_link(tmp_path: Path) -> None:
    """What a person sees in the terminal: `console (one-time login link): ...`, which signs in once."""
    broker = ServeProcess(tmp_path, "--in-memory", "--amqp-port", "0", "--admin-port", "0")
    try:
        entry = broker.wait_ready()
        assert broker.proc.stdout is not None
        printed = ""
        while "console (one-time login link)" not in printed:
            line = broker.proc.stdout.readline()
            assert line, f"serve printed no login link: {printed}"
            printed += line
        link = re.search(r"console \(one-time login link\): (\S+)", printed).group(1)
        assert link == entry["console_url"] and link.startswith(f"http://127.0.0.1:{entry['admin_port']}/")
        page = ConsoleClient(link.split("/$console")[0]).get(link)
        assert page.status == 200 and "signed in as <b>RootManageSharedAccessKey</b>" in page.html
    finally:
        broker.stop()


def test_the_session_cookie_is_secure_over_https(broker: dict[str, Any]) -> None:
    """Over https:// (the broker's certificate) the cookie goes back over HTTPS only; over plain HTTP on
    loopback it cannot be marked so (the browser would drop it)."""
    key = re.search(r"SharedAccessKey=([^;]+)", broker["connection_string"]).group(1)
    form = urllib.parse.urlencode({"policy": "RootManageSharedAccessKey", "key": key}).encode()
    cookies = {}
    verified = ssl.create_default_context(cafile=broker["cert_path"])
    for scheme in ("https", "http"):
        opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=verified), _NoRedirect())
        request = urllib.request.Request(f"{scheme}://localhost:{broker['admin_port']}/$console/login",
                                         data=form, method="POST")
        with pytest.raises(urllib.error.HTTPError) as answer:  # the 303 to the console, not followed
            opener.open(request, timeout=30)
        assert answer.value.code == 303
        cookies[scheme] = answer.value.headers["Set-Cookie"]
    assert cookies["https"].endswith("; Secure") and "HttpOnly" in cookies["https"]
    assert "Secure" not in cookies["http"]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: Any) -> None:
        return None


def test_the_printed_login_link_works_once(broker: dict[str, Any]) -> None:
    link = broker["console_url"]
    assert link.startswith(_base(broker) + "/$console/login?once=")
    first = ConsoleClient(_base(broker)).get(link)
    assert first.status == 200 and "signed in as <b>RootManageSharedAccessKey</b>" in first.html
    again = ConsoleClient(_base(broker)).get(link)
    assert again.status == 401 and "works once" in again.html


def test_pages_show_entities_counts_and_messages(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    home = client.get("/$console/")
    assert home.status == 200 and 'id="ns-status" class="badge status-up">up' in home.html
    assert "events/subscriptions/all" in home.html and "→ audit" in home.html  # the forwarding arrow
    assert "SharedAccessKeyName=RootManageSharedAccessKey" in home.html  # a connection string to copy
    strings = dict(re.findall(r'<dt>([^<]+)</dt><dd class="copy-field"><input readonly class="copy" '
                              r'value="([^"]+)"',
                              home.html))
    management = strings["Management API (ServiceBusAdministrationClient)"].replace("&#x27;", "'")
    assert f'connection_verify="{broker["cert_path"]}"' in home.html
    verify = broker["cert_path"]
    with ServiceBusAdministrationClient.from_connection_string(management, connection_verify=verify) as admin:
        assert admin.get_queue("orders").name == "orders"
    with ServiceBusClient.from_connection_string(strings["AMQP (ServiceBusClient)"]) as sb, \
            sb.get_queue_receiver("orders", max_wait_time=5) as receiver:
        receiver.peek_messages(max_message_count=1)
    before = _row(client, "orders")[0]
    _send(broker, "orders", ServiceBusMessage('{"order": 7}', message_id="m-7", subject="new",
                                              application_properties={"region": "west"}))
    assert _row(client, "orders")[0] == before + 1
    page = client.get("/$console/entity/orders")
    message = re.search(r'<tbody class="message-group">.*?</tbody>', page.html, re.S).group(0)
    assert "m-7" in message and "new" in message and "region" in message and "&#x27;west&#x27;" in message
    assert "body as text" in message and "body as json" in message and "body as hex" in message
    assert "7b 22 6f 72 64 65 72" in message  # '{"order' in hex


def _totals(client: ConsoleClient, entity: str) -> tuple[float, list[int]]:
    """When, and the totals (enqueued, completed, dead-lettered) the entity's sparkline plots from."""
    fragment = client.get("/$console/fragments/entities").html
    canvas = re.search(rf'<canvas class="spark" [^>]*data-entity="{re.escape(entity)}"[^>]*>', fragment)
    assert canvas, fragment
    values = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', canvas.group(0)))
    return float(values["at"]), [int(values[k]) for k in ("enqueued", "completed", "dead-lettered")]


def test_the_sparkline_gets_the_entity_message_totals(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    at, before = _totals(client, "events/subscriptions/all")
    with ServiceBusClient.from_connection_string(broker["connection_string"]) as sb, \
            sb.get_topic_sender("events") as sender:
        sender.send_messages([ServiceBusMessage(f"rate-{i}") for i in range(3)])
    later, after = _totals(client, "events/subscriptions/all")
    assert later > at and after == [before[0] + 3, before[1], before[2]]  # forwarded on to audit
    topic = re.search(r'<canvas class="spark" [^>]*data-entity="events"[^>]*>',
                      client.get("/$console/fragments/entities").html).group(0)
    assert "data-enqueued" in topic and "data-completed" not in topic  # a topic holds nothing to complete
    _, audit = _totals(client, "audit")
    with ServiceBusClient.from_connection_string(broker["connection_string"]) as sb, \
            sb.get_queue_receiver("audit", max_wait_time=5) as receiver:
        mine = []
        while len(mine) < 3:  # only the three sent here: the other tests count the rest
            batch = receiver.receive_messages(max_message_count=10, max_wait_time=5)
            assert batch, "the forwarded messages did not arrive in audit"
            for message in batch:
                if str(message).startswith("rate-"):
                    receiver.complete_message(message)
                    mine.append(message)
                else:
                    receiver.abandon_message(message)
    _, now = _totals(client, "audit")
    assert now == [audit[0], audit[1] + 3, audit[2]]


def test_paging_goes_through_every_partition(broker: dict[str, Any]) -> None:
    """A partitioned queue's peek gives one partition at a time: the pager goes on to the next one."""
    client = _manager(broker)
    keys = ["k-a", "k-b"]  # two keys that map to two partitions (the engine hashes them with CRC-32)
    _send(broker, "sharded", *[ServiceBusMessage(f"{key}-{i}", partition_key=key)
                               for key in keys for i in range(3)])
    seen: list[str] = []
    link = "/$console/entity/sharded"
    for _ in range(20):
        page = client.get(link).html
        seen += re.findall(r'<pre class="body-text">(k-[ab]-\d)</pre>', page)
        following = re.search(r'id="next-page" href="([^"]+)"', page)
        if following is None or len(seen) == 6:
            break
        link = following.group(1).replace("&amp;", "&")
    assert sorted(seen) == [f"{key}-{i}" for key in keys for i in range(3)]
    counts = client.get("/$console/fragments/entity/sharded")
    assert counts.status == 200 and "active 6" in counts.html and 'class="spark"' in counts.html


def test_paging_through_peeked_messages(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    _send(broker, "audit", *[ServiceBusMessage(f"page-{i}") for i in range(25)])
    first = client.get("/$console/entity/audit")
    assert first.html.count('<tr class="message"') == 20
    next_link = re.search(r'id="next-page" href="([^"]+)"', first.html).group(1)
    second = client.get(next_link.replace("&amp;", "&"))
    assert second.html.count('<tr class="message"') == 5 and "page-24" in second.html
    assert "page-0" not in second.html


def test_dead_letters_resubmit_and_purge(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    _send(broker, "orders", ServiceBusMessage("broken", message_id="dl-1"))
    with ServiceBusClient.from_connection_string(broker["connection_string"]) as sb, \
            sb.get_queue_receiver("orders", max_wait_time=5) as receiver:
        for message in receiver.receive_messages(max_message_count=10, max_wait_time=5):
            receiver.dead_letter_message(message, reason="BadOrder", error_description="no customer")
    dlq = client.get("/$console/entity/orders?queue=dlq")
    assert "BadOrder" in dlq.html and "no customer" in dlq.html and "dl-1" in dlq.html
    assert "dead-lettered: <b>BadOrder</b> — no customer" in dlq.html
    dead = _row(client, "orders")[1]
    assert dead >= 1
    asked = client.post("/$console/entity/orders/actions?queue=dlq", {"action": "resubmit"}, dlq.csrf)
    assert asked.status == 200 and 'id="confirmation"' in asked.html and _row(client, "orders")[1] == dead
    assert "Resubmit every message of orders/$DeadLetterQueue?" in asked.html  # asked, nothing done
    resubmitted = client.post("/$console/entity/orders/actions?queue=dlq",
                              {"action": "resubmit", "confirmed": "1"}, dlq.csrf)
    assert resubmitted.status == 200 and f"Resubmitted {dead} message(s)" in resubmitted.html
    assert _row(client, "orders")[1] == 0
    with ServiceBusClient.from_connection_string(broker["connection_string"]) as sb, \
            sb.get_queue_receiver("orders", max_wait_time=5) as receiver:
        back = {str(m.message_id): m for m in receiver.peek_messages(max_message_count=50)}
    assert "dl-1" in back and "DeadLetterReason" not in (back["dl-1"].application_properties or {})
    asked = client.post("/$console/entity/orders/actions?queue=main", {"action": "purge"}, dlq.csrf)
    assert 'id="confirmation"' in asked.html and "Purge orders?" in asked.html and _row(client, "orders")[0]
    purged = client.post("/$console/entity/orders/actions?queue=main", {"action": "purge", "confirmed": "1"},
                         dlq.csrf)
    assert purged.status == 200 and "Purged" in purged.html
    assert _row(client, "orders")[0] == 0


def test_purging_a_session_queue(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    _send(broker, "carts", *[ServiceBusMessage(f"item-{i}", session_id=f"cart-{i % 2}") for i in range(4)])
    page = client.get("/$console/entity/carts")
    assert 'name="session_id" required' in page.html  # its send form asks for a session
    purged = client.post("/$console/entity/carts/actions?queue=main", {"action": "purge", "confirmed": "1"},
                         page.csrf)
    assert purged.status == 200 and "Purged 4 message(s) from carts" in purged.html
    assert _row(client, "carts")[0] == 0


def test_send_a_test_message_from_the_console(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    page = client.get("/$console/entity/audit")
    sent = client.post("/$console/entity/audit/actions?queue=main",
                       {"action": "send", "body": "hello from the console", "message_id": "console-1",
                        "properties": '{"source": "console"}'}, page.csrf)
    assert sent.status == 200 and "Sent a message to audit" in sent.html
    with ServiceBusClient.from_connection_string(broker["connection_string"]) as sb, \
            sb.get_queue_receiver("audit", max_wait_time=5) as receiver:
        found = [m for m in receiver.peek_messages(max_message_count=100) if m.message_id == "console-1"]
    assert [str(m) for m in found] == ["hello from the console"]
    assert found[0].application_properties == {b"source": b"console"}  # the SDK reads strings as bytes
    scheduled = _row(client, "audit")[3]
    later = client.post("/$console/entity/audit/actions?queue=main",
                        {"action": "send", "body": "later", "schedule_seconds": "3600"}, page.csrf)
    assert later.status == 200 and _row(client, "audit")[3] == scheduled + 1
    bad = client.post("/$console/entity/audit/actions?queue=main",
                      {"action": "send", "body": "x", "properties": "[1, 2]"}, page.csrf)
    assert bad.status == 400 and "JSON object" in bad.html


def test_a_listen_only_key_peeks_but_cannot_change_anything(broker: dict[str, Any]) -> None:
    _send(broker, "orders", ServiceBusMessage("keep me", message_id="keep-1"))
    reader = ConsoleClient(_base(broker))
    home = reader.sign_in("reader", LISTENER_KEY)
    assert home.status == 200 and "signed in as <b>reader</b>" in home.html
    assert 'id="fault-drop"' not in home.html and LISTENER_KEY in home.html  # its own connection string
    assert "U0FTX0tFWV9WQUxVRQ==" not in home.html
    page = reader.get("/$console/entity/orders")
    assert "keep-1" in page.html and 'id="purge"' not in page.html and 'id="send"' not in page.html
    before = _row(reader, "orders")
    for queue, form in (("main", {"action": "purge"}), ("dlq", {"action": "resubmit"}),
                        ("main", {"action": "send", "body": "no"})):
        refused = reader.post(f"/$console/entity/orders/actions?queue={queue}", form, page.csrf)
        assert refused.status == 401 and "claim(s) are required" in refused.html, form
    down = reader.post("/$console/faults", {"namespace_down": "drop"}, page.csrf)
    assert down.status == 401
    assert _row(reader, "orders") == before
    assert _manager(broker).get("/$console/").html.count('class="badge status-up"') == 1


def test_a_form_without_the_session_token_is_refused(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    assert client.post("/$console/faults", {"namespace_down": "drop"}, None).status == 403
    assert client.post("/$console/faults", {"namespace_down": "drop"}, "other").status == 403
    assert client.post("/$console/faults", {"namespace_down": "drop"}, "jeton-é").status == 403
    assert 'class="badge status-up"' in client.get("/$console/").html


def test_taking_the_namespace_down_and_back_up(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    page = client.get("/$console/")
    asked = client.post("/$console/faults", {"namespace_down": "drop"}, page.csrf)
    assert 'id="confirmation"' in asked.html and "Take the namespace down?" in asked.html
    assert 'class="badge status-up"' in client.get("/$console/fragments/status").html  # nothing done yet
    down = client.post("/$console/faults", {"namespace_down": "drop", "confirmed": "1"}, page.csrf)
    assert "Namespace down (connections dropped), latency 0 ms." in down.html
    assert down.status == 200 and 'class="badge status-down">down (drop)' in down.html
    assert 'class="badge status-down">down (drop)' in client.get("/$console/fragments/status").html
    try:
        with pytest.raises(ServiceBusConnectionError), \
                ServiceBusClient.from_connection_string(broker["connection_string"], retry_total=0) as sb, \
                sb.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("during the outage"))
        assert "orders" in client.get("/$console/fragments/entities").html  # the console keeps working
    finally:
        up = client.post("/$console/faults", {"namespace_down": "up"}, page.csrf)
    assert up.status == 200 and 'class="badge status-up">up' in up.html
    _send(broker, "orders", ServiceBusMessage("after the outage"))
    latency = client.post("/$console/faults", {"latency_ms": "abc"}, page.csrf)
    assert latency.status == 400


def test_static_assets_are_served_from_the_package(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    script = client.get("/$console/static/console.js")
    assert script.status == 200 and "data-refresh" in script.html
    assert client.get("/$console/static/nope.js").status == 404
    anonymous = ConsoleClient(_base(broker))  # the icon browsers ask every site for needs no session
    for path in ("/favicon.ico", "/$console/static/favicon.svg"):
        icon = anonymous.get(path)
        assert icon.status == 200 and icon.html.startswith("<svg"), path


def test_unknown_entities_are_404(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    missing = client.get("/$console/entity/nope")
    assert missing.status == 404 and "No queue, topic or subscription &#x27;nope&#x27;" in missing.html



def test_each_namespace_links_to_the_others_consoles() -> None:
    topology = {"namespaces": {"primary": {"queues": {"q": {}}}, "secondary": {"queues": {"q": {}}}}}
    with BrokerServer(topology) as server:
        primary, secondary = server.namespaces["primary"], server.namespaces["secondary"]
        client = ConsoleClient(f"http://127.0.0.1:{primary.admin_port}")
        home = client.get(primary.console_url)
        assert f'href="http://127.0.0.1:{secondary.admin_port}/$console/">secondary<' in home.html
        assert "<b>primary</b> <small>(this one)</small>" in home.html
        secondary.faults.set({"namespace_down": "refuse", "latency_ms": 40})  # as its control API would
        row = re.search(r'<tr data-namespace="secondary">.*?</tr>', client.get("/$console/").html).group(0)
        assert 'class="badge status-down">down (refuse)' in row and "40 ms" in row
        refreshed = client.get("/$console/fragments/namespaces").html  # what the open page reloads
        assert re.search(r'<tr data-namespace="secondary">.*?down \(refuse\).*?</tr>', refreshed)
        other = ConsoleClient(f"http://127.0.0.1:{secondary.admin_port}")
        assert other.get(f"http://127.0.0.1:{secondary.admin_port}/$console/").url.endswith("/login")
        assert other.sign_in(primary.policy.name, primary.policy.key).status == 401  # its own keys


def test_partitions_and_latency_switches(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    page = client.get("/$console/entity/sharded")
    assert "partitions" in client.get("/$console/").html and 'value="3:down"' in page.html
    down = client.post("/$console/entity/sharded/partitions", {"partition": "3:down", "confirmed": "1"},
                       page.csrf)
    assert down.status == 200 and "Partition 3 down." in down.html
    assert 'value="3:up" class="btn down"' in down.html and 'value="4:down" class="btn up"' in down.html
    assert "sharded partition 3" in client.get("/$console/").html
    up = client.post("/$console/entity/sharded/partitions", {"partition": "3:up"}, page.csrf)
    assert up.status == 200 and "sharded partition 3" not in client.get("/$console/").html
    wrong = client.post("/$console/entity/sharded/partitions", {"partition": "99:down", "confirmed": "1"},
                        page.csrf)
    assert wrong.status == 400
    slow = client.post("/$console/faults", {"latency_ms": "150"}, page.csrf)
    assert slow.status == 200 and "latency 150 ms" in slow.html
    assert client.post("/$console/faults", {"latency_ms": "0"}, page.csrf).status == 200


def test_disabling_a_queue_from_its_page(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    page = client.get("/$console/entity/orders")
    assert "<option selected>Active</option>" in page.html
    disabled = client.post("/$console/entity/orders/status", {"status": "SendDisabled", "confirmed": "1"},
                           page.csrf)
    assert disabled.status == 200 and "Status of orders: SendDisabled." in disabled.html
    try:
        with pytest.raises(ServiceBusError, match="disabled"):
            # the SDK counts a disabled entity retryable: without retries it is told at once, not after 15 s
            _send(broker, "orders", ServiceBusMessage("refused"), retry_total=0)
        entities = client.get("/$console/fragments/entities").html
        assert '<span class="badge warn">SendDisabled</span>' in entities
    finally:
        active = client.post("/$console/entity/orders/status", {"status": "Active"}, page.csrf)
    assert active.status == 200 and "<option selected>Active</option>" in active.html
    _send(broker, "orders", ServiceBusMessage("accepted again"))
    wrong = client.post("/$console/entity/orders/status", {"status": "Paused", "confirmed": "1"}, page.csrf)
    assert wrong.status == 400 and "The status must be one of" in wrong.html
    reader = ConsoleClient(_base(broker))
    reader_page = reader.sign_in("reader", LISTENER_KEY)
    assert 'id="entity-status"' not in reader.get("/$console/entity/orders").html
    refused = reader.post("/$console/entity/orders/status", {"status": "Disabled"}, reader_page.csrf)
    assert refused.status == 401 and "&#x27;Manage&#x27; claim(s) are required" in refused.html


def test_send_to_a_topic_reaches_its_subscription_and_its_forward(broker: dict[str, Any]) -> None:
    client = _manager(broker)
    page = client.get("/$console/entity/events")
    assert page.status == 200 and "peek them there" in page.html and 'id="tab-dlq"' not in page.html
    assert 'href="/$console/entity/events/subscriptions/all">events/subscriptions/all</a>' in page.html
    subscription = client.get("/$console/entity/events/subscriptions/all").html
    assert "Resubmitting sends to the topic events" in \
        client.get("/$console/entity/events/subscriptions/all?queue=dlq").html
    details = re.search(r'id="entity-details">(.*?)</p>', subscription).group(1)
    assert "subscription" in details and "$Default: TrueFilter" in details and "→ audit" in details
    audit = _row(client, "audit")[0]
    sent = client.post("/$console/entity/events/actions?queue=main", {"action": "send", "body": "fan out"},
                       page.csrf)
    assert sent.status == 200 and "Sent a message to events" in sent.html
    assert _row(client, "audit")[0] == audit + 1  # events -> subscription all -> forwarded to audit
    refused = client.post("/$console/entity/events/actions?queue=main", {"action": "purge", "confirmed": "1"},
                          page.csrf)
    assert refused.status == 400 and "Cannot receive from topic" in refused.html
