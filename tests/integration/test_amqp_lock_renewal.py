"""AutoLockRenewer renewing many locks at once, as the SDK's auto_lock_renew sample does (sync and async).

Its renewals race on the client's session counter and send management requests with one delivery-id twice
(or skip one); proton would end the session ("sequencing error"), Service Bus serves them all. The broker puts
the ids back in sequence before proton sees them (compat.IncomingFrames), so every renewal is answered and
every message completes after more than one lock duration. The sync case runs on uAMQP-C as well.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from azure.servicebus import AutoLockRenewer, ServiceBusMessage
from azure.servicebus.aio import AutoLockRenewer as AsyncAutoLockRenewer
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from local_broker.server import BrokerServer
from tests.integration.tls_clients import SDK_STACKS, sdk_client
from topology import parse

LOCK_S = 10  # long enough for renewals to keep up on a loaded 2-core machine
MESSAGES = 25
TOPOLOGY = {"namespaces": {"renew": {"queues": {
    "sync": {"lock_duration": f"PT{LOCK_S}S"}, "async": {"lock_duration": f"PT{LOCK_S}S"}}}}}


@pytest.fixture(scope="module")
def broker():
    with BrokerServer(parse(TOPOLOGY)) as server:
        yield server


@pytest.fixture(scope="module")
def connection_string(broker):
    return broker.namespaces["renew"].connection_string


@pytest.mark.parametrize("stack", SDK_STACKS)
def test_many_locks_renewed_at_once(broker, stack: str) -> None:
    failures: list = []
    with sdk_client(broker, stack, "renew") as client:
        with client.get_queue_sender("sync") as sender:
            sender.send_messages([ServiceBusMessage(f"{stack}-{i}") for i in range(MESSAGES)])
        renewer = AutoLockRenewer()
        with client.get_queue_receiver("sync", max_wait_time=5) as receiver:
            received = []
            while len(received) < MESSAGES:
                received += receiver.receive_messages(max_message_count=MESSAGES, max_wait_time=5)
            if stack.startswith("uamqp"):
                # uAMQP creates its management link on first use without a lock: renewals racing for it
                # attach two links of one name, which proton (as AMQP says) answers by closing the
                # connection (seen once in CI). One renewal first makes the link; the race under test, the
                # delivery-ids of concurrent requests, stays.
                receiver.renew_message_lock(received[0])
            for message in received:
                renewer.register(receiver, message, max_lock_renewal_duration=60,
                                 on_lock_renew_failure=lambda _, error: failures.append(error))
            time.sleep(LOCK_S * 1.3)
            for message in received:
                receiver.complete_message(message)
        renewer.close()
    assert failures == []


def test_many_locks_renewed_at_once_async(connection_string) -> None:
    failures: list = []

    async def on_failure(_, error) -> None:
        failures.append(error)

    async def main() -> None:
        async with AsyncServiceBusClient.from_connection_string(connection_string) as client:
            async with client.get_queue_sender("async") as sender:
                await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(MESSAGES)])
            renewer = AsyncAutoLockRenewer()
            async with client.get_queue_receiver("async", max_wait_time=5) as receiver:
                received = []
                while len(received) < MESSAGES:
                    received += await receiver.receive_messages(max_message_count=MESSAGES, max_wait_time=5)
                for message in received:
                    renewer.register(receiver, message, max_lock_renewal_duration=60,
                                     on_lock_renew_failure=on_failure)
                await asyncio.sleep(LOCK_S * 1.3)
                for message in received:
                    await receiver.complete_message(message)
            await renewer.close()

    asyncio.run(main())
    assert failures == []
