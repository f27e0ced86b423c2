"""Drills: the broker killed (-9) at random moments and stopped (SIGTERM) under load from SDK clients.

Acknowledged means durable: every send the SDK saw succeed is, after restarts, either completed or still
in the queue (0 lost), and no message whose completion the SDK saw succeed comes back (0 completed then
redelivered).
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from tests.chaos.harness import BrokerProcess, drain, topology

pytestmark = pytest.mark.slow

SENDERS, RECEIVERS = 4, 2
KILLS = 3
BATCH = 20
LOCK_SECONDS = 5
# Messages locked when the broker died stay locked (the lock is stored) until their lock expires.
TOPOLOGY = topology({"work": {"lock_duration": f"PT{LOCK_SECONDS}S"}})


class Load:
    """SDK senders and receivers on one broker run, until it goes away."""

    def __init__(self, connection_string: str, round_id: int) -> None:
        self.acknowledged: list[str] = []
        self.completed: list[str] = []
        self.settling: list[str] = []  # completions sent when the broker died: either outcome is right
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._send, args=(connection_string, f"r{round_id}s{i}"))
                        for i in range(SENDERS)]
        self.threads += [threading.Thread(target=self._receive, args=(connection_string,))
                         for _ in range(RECEIVERS)]
        for thread in self.threads:
            thread.start()

    def _send(self, connection_string: str, prefix: str) -> None:
        try:
            with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client, \
                    client.get_queue_sender("work") as sender:
                n = 0
                while not self.stop.is_set():
                    ids = [f"{prefix}-{n + i}" for i in range(BATCH)]
                    sender.send_messages([ServiceBusMessage(i, message_id=i) for i in ids])
                    self.acknowledged.extend(ids)
                    n += BATCH
        except Exception:  # the broker went away: what was acknowledged so far is what counts
            return

    def _receive(self, connection_string: str) -> None:
        try:
            with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client, \
                    client.get_queue_receiver("work", max_wait_time=1) as receiver:
                while not self.stop.is_set():
                    for message in receiver.receive_messages(max_message_count=BATCH, max_wait_time=1):
                        message_id = str(message.message_id)
                        self.settling.append(message_id)
                        receiver.complete_message(message)
                        self.settling.remove(message_id)
                        self.completed.append(message_id)
        except Exception:
            return

    def end(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)
            assert not thread.is_alive(), "an SDK client hung on the stopped broker"


def _drain(connection_string: str) -> list[str]:
    time.sleep(LOCK_SECONDS + 1)  # the locks taken before the broker stopped run out
    return drain(connection_string, "work")


def _check(acknowledged: list[str], completed: list[str], settling: list[str], remaining: list[str]) -> None:
    lost = set(acknowledged) - set(completed) - set(settling) - set(remaining)
    redelivered = set(completed) & set(remaining)
    print(f"acknowledged {len(acknowledged)}, completed {len(completed)}, completing at the kill "
          f"{len(settling)}, remaining {len(remaining)}, "
          f"lost {len(lost)}, completed then redelivered {len(redelivered)}")
    assert len(acknowledged) >= 200, "too little load to tell anything"
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {sorted(lost)[:5]}"
    assert not redelivered, f"{len(redelivered)} completed messages came back, e.g. {sorted(redelivered)[:5]}"


@pytest.mark.parametrize("sync", ["full", "normal"])
def test_kill_9_at_random_moments_under_load(tmp_path: Path, sync: str) -> None:
    rng = random.Random(15)
    broker = BrokerProcess(tmp_path, TOPOLOGY, data_dir=tmp_path / "data", sync=sync)
    acknowledged: list[str] = []
    completed: list[str] = []
    settling: list[str] = []
    try:
        for round_id in range(KILLS):
            broker.start()
            load = Load(broker.connection_string, round_id)
            time.sleep(rng.uniform(1.5, 3.5))
            broker.kill()
            load.end()
            acknowledged += load.acknowledged
            completed += load.completed
            settling += load.settling
        broker.start()
        _check(acknowledged, completed, settling, _drain(broker.connection_string))
    finally:
        broker.kill()


def test_sigterm_under_load_exits_cleanly(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, TOPOLOGY, data_dir=tmp_path / "data")
    try:
        broker.start()
        load = Load(broker.connection_string, 0)
        time.sleep(2)
        assert broker.terminate(timeout=30) == 0
        load.end()
        broker.start()
        _check(load.acknowledged, load.completed, load.settling, _drain(broker.connection_string))
    finally:
        broker.kill()
