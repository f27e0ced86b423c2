"""Drill: the broker's data directory on a small tmpfs that fills up.

A full disk must be an answer, not a stall: a send fails at once with the quota error, receives and
completes keep working, /health says why the namespace is degraded, sends work again once there is
room, and nothing acknowledged is lost (checked after a restart, from the store).
"""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusQuotaExceededError

from tests.chaos.harness import BrokerProcess, drain, tmpfs, topology

pytestmark = pytest.mark.slow

DISK_MB = 48
FILLER_CHUNK = 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", DISK_MB, "the disk-full drill") as mount:
        yield mount


def _fill(path: Path) -> None:
    """Write zeros until the filesystem refuses."""
    chunk = bytes(FILLER_CHUNK)
    with open(path, "wb", buffering=0) as handle:
        while True:
            try:
                handle.write(chunk)
            except OSError:
                break
        try:
            while True:  # the last partial megabyte
                handle.write(bytes(4096))
        except OSError:
            pass


def _health(broker: BrokerProcess) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=broker.namespace["cert_path"])
    context.check_hostname = False
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{broker.admin_port}/health", context=context,
                                    timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_full_disk_refuses_sends_keeps_receiving_and_recovers(tmp_path: Path, small_disk: Path) -> None:
    data = small_disk / "data"
    raw = topology({"orders": {}})
    acknowledged: list[str] = []
    with BrokerProcess(tmp_path, raw, data_dir=data) as broker:
        with ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client, \
                client.get_queue_sender("orders") as sender:
            for i in range(20):
                sender.send_messages(ServiceBusMessage(b"x" * 1024, message_id=f"before-{i}"))
                acknowledged.append(f"before-{i}")
            _fill(small_disk / "filler")

            # The first send right after usually reaches the store (whose commit fails and rolls back);
            # the next, after the broker has looked at the free space again, is refused before it.
            for attempt in range(2):
                started = time.monotonic()
                with pytest.raises(ServiceBusQuotaExceededError, match=r"(?i)full"):
                    sender.send_messages(ServiceBusMessage(b"x" * 1024, message_id=f"refused-{attempt}"))
                refused_after = time.monotonic() - started
                assert refused_after < 1.0, f"the send took {refused_after:.2f} s to fail"
                time.sleep(0.6)
            status, body = _health(broker)
            assert status == 503 and "storage full" in body, body

            with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
                [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
                receiver.complete_message(message)  # settlements keep working on a full disk
            acknowledged.remove(str(message.message_id))

            (small_disk / "filler").unlink()
            deadline = time.monotonic() + 10
            while True:
                try:
                    sender.send_messages(ServiceBusMessage(b"x" * 1024, message_id="after"))
                    acknowledged.append("after")
                    break
                except ServiceBusQuotaExceededError:
                    assert time.monotonic() < deadline, "sends were still refused 10 s after space came back"
                    time.sleep(0.2)
            status, body = _health(broker)
            assert status == 200, body
        broker.kill()  # kill -9: what was acknowledged must be in the store
        broker.start()
        assert sorted(drain(broker.connection_string, "orders")) == sorted(acknowledged)
        assert "Traceback" not in broker.log()
