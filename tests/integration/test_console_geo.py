"""The console of a geo-replicated namespace: its replicas, and a promotion that asks first and needs the
Manage right."""

from __future__ import annotations

import pytest

from local_broker.server import BrokerServer
from tests.console_client import ConsoleClient

READER_KEY = "cmVhZGVyLWtleQ=="
TOPOLOGY = {"namespaces": {"orders": {
    "geo_replication": {"regions": ["west", "north"], "mode": "synchronous"},
    "policies": {"RootManageSharedAccessKey": {"key": "bWFuYWdlLWtleQ==", "rights": ["Manage", "Send",
                                                                                     "Listen"]},
                 "reader": {"key": READER_KEY, "rights": ["Listen"]}},
    "queues": {"work": {}}}}}


@pytest.fixture(scope="module")
def server():
    with BrokerServer(TOPOLOGY) as server:
        yield server


def _client(server, policy: str, key: str) -> ConsoleClient:
    client = ConsoleClient(f"http://127.0.0.1:{server.namespaces['orders'].admin_port}")
    assert client.sign_in(policy, key).status == 200
    return client


def test_the_replicas_show_and_a_promotion_asks_first(server):
    client = _client(server, "RootManageSharedAccessKey", "bWFuYWdlLWtleQ==")
    page = client.get("/$console/")
    assert '<tr data-region="west"><td>west</td><td>Primary</td><td>Ready</td>' in page.html
    assert 'id="promote-north"' in page.html and 'id="force-north"' in page.html
    asked = client.post("/$console/geo/promote", {"region": "north", "mode": "forced"}, page.csrf)
    assert 'id="confirmation"' in asked.html and "Force the promotion of north?" in asked.html
    assert server.namespaces["orders"].geo.status()["primary"] == "west"  # nothing done yet
    done = client.post("/$console/geo/promote", {"region": "north", "mode": "planned", "confirmed": "1"},
                       page.csrf)
    assert done.status == 200 and "north is the primary (planned promotion, nothing lost)." in done.html
    assert '<tr data-region="north"><td>north</td><td>Primary</td>' in done.html
    refused = client.post("/$console/geo/promote", {"region": "north", "confirmed": "1"}, page.csrf)
    assert refused.status == 409 and "already the primary" in refused.html


def test_a_listen_key_sees_the_replicas_but_cannot_promote(server):
    client = _client(server, "reader", READER_KEY)
    page = client.get("/$console/")
    assert 'id="replicas"' in page.html and "promote-" not in page.html
    refused = client.post("/$console/geo/promote", {"region": "west", "confirmed": "1"}, page.csrf)
    assert refused.status == 401
