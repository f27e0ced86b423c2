"""Runs one Service Bus trigger like the Functions host: receivers with prefetch and lock auto-renewal,
batches handed to the function, complete on success, retry per the function's policy, abandon on final
failure. Stopping lets every in-flight batch finish and settle before the receivers close."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import OperationTimeoutError, ServiceBusError

from replicators.connections import Connection
from replicators.errors import is_transient
from replicators.host.batching import next_batch
from replicators.host.conversion import to_function_message
from replicators.host.hostjson import ServiceBusHostOptions
from replicators.host.loader import ServiceBusTrigger
from replicators.host.lock_watch import LockWatch
from replicators.host.settlement import complete_messages
from replicators.host.stats import TriggerStats
from replicators.replicate import PoisonMessageError

log = logging.getLogger(__name__)
RECONNECT_DELAY = dt.timedelta(seconds=1)
STOP_GRACE = dt.timedelta(seconds=5)  # for workers that hold no messages to close their receivers
IDLE_RECEIVE_WAIT = dt.timedelta(seconds=1)  # how often an idle worker looks at the stop event
LOCK_RENEW_MARGIN = dt.timedelta(seconds=10)  # the SDK's AutoLockRenewer renews this long before expiry


@dataclass(frozen=True)
class TriggerOptions:
    """host.json settings with the binding's per-function overrides applied."""

    batch_size: int
    min_batch_size: int
    concurrency: int
    prefetch_count: int
    auto_complete: bool
    lock_renewal: dt.timedelta
    batch_wait: dt.timedelta
    session_idle: dt.timedelta

    @classmethod
    def of(cls, trigger: ServiceBusTrigger, host: ServiceBusHostOptions) -> TriggerOptions:
        batch = (trigger.max_message_batch_size or host.max_message_batch_size) if trigger.many else 1
        if trigger.sessions:
            concurrency = host.max_concurrent_sessions
        else:
            concurrency = trigger.max_concurrent_calls or host.max_concurrent_calls
        return cls(
            batch_size=batch,
            min_batch_size=host.min_message_batch_size if trigger.many else 1,
            concurrency=concurrency,
            prefetch_count=host.prefetch_count,
            auto_complete=host.auto_complete_messages
            if trigger.auto_complete is None
            else trigger.auto_complete,
            lock_renewal=host.max_auto_lock_renewal_duration,
            batch_wait=host.max_batch_wait_time,
            session_idle=host.session_idle_timeout,
        )


class TriggerRunner:
    def __init__(
        self,
        trigger: ServiceBusTrigger,
        connection: Connection,
        options: TriggerOptions,
        stop: threading.Event,
        *,
        stats: TriggerStats | None = None,
        client_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.trigger = trigger
        self.options = options
        self.stats = stats or TriggerStats(trigger.function_name)
        self._connection = connection
        self._stop = stop
        self._client_kwargs = client_kwargs or {}
        self._threads: list[threading.Thread] = []
        self._holding: set[str] = set()  # workers between receiving a batch and settling it
        self._opening: set[str] = set()  # workers opening a receiver (connecting, or waiting for a session)
        # One renewal at a time: concurrent management requests on one receiver's link break the SDK.
        self._renewer = AutoLockRenewer(
            max_lock_renewal_duration=options.lock_renewal.total_seconds(),
            on_lock_renew_failure=self._lock_renew_failed,
            max_workers=1,
        )
        self._lock_watch = LockWatch(trigger.function_name)

    def describe(self) -> str:
        options = self.options
        return (f"{self.trigger.function_name} <- {self.trigger.source} (batch {options.batch_size}, "
                f"concurrency {options.concurrency}, prefetch {options.prefetch_count}, "
                f"sessions {self.trigger.sessions}, retry {self.trigger.retry})")

    def start(self) -> None:
        for index in range(self.options.concurrency):
            thread = threading.Thread(
                target=self._work, name=f"{self.trigger.function_name}-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def join(self, timeout: float | None = None) -> None:
        """Wait for every worker that holds messages, and give those with a receiver open STOP_GRACE to
        close it cleanly. A worker still opening one (connecting, waiting for a session, or retrying a
        broker that is gone) holds nothing: waiting for it would tie the stop to the broker's answer and
        the SDK's retries, so it is left to leave on its own (a daemon thread)."""
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        for thread in self._threads:
            while thread.is_alive() and thread.name not in self._opening and (
                thread.name in self._holding or time.monotonic() - started < STOP_GRACE.total_seconds()
            ):
                if deadline is not None and time.monotonic() > deadline:
                    break
                thread.join(0.05)
        self._lock_watch.close()
        self._renewer.close()

    # receiving

    def _work(self) -> None:
        with self._connection.client(**self._client_kwargs) as client:
            while not self._stop.is_set():
                try:
                    with self._opened(self._receiver(client)) as receiver:
                        self._drain(receiver)
                except OperationTimeoutError:
                    continue  # no session became available within the idle timeout
                except ServiceBusError as exc:
                    if not is_transient(exc):
                        log.error(
                            "%s: cannot receive from %s: %s",
                            self.trigger.function_name,
                            self.trigger.source,
                            exc,
                        )
                    else:
                        log.warning(
                            "%s: receive interrupted (%s); reconnecting", self.trigger.function_name, exc
                        )
                    self._stop.wait(RECONNECT_DELAY.total_seconds())

    @contextlib.contextmanager
    def _opened(self, receiver: ServiceBusReceiver) -> Iterator[ServiceBusReceiver]:
        """The receiver opened (its link attached; for sessions, a session locked), the worker marked as
        opening meanwhile (see join), and closed at the end."""
        name = threading.current_thread().name
        self._opening.add(name)
        try:
            receiver.__enter__()
        finally:
            self._opening.discard(name)
        try:
            yield receiver
        finally:
            receiver.__exit__(None, None, None)

    def _receiver(self, client: ServiceBusClient) -> ServiceBusReceiver:
        kwargs: dict[str, Any] = {"prefetch_count": self.options.prefetch_count}
        if self.trigger.dead_letter:
            kwargs["sub_queue"] = ServiceBusSubQueue.DEAD_LETTER
        if self.trigger.sessions:
            kwargs["auto_lock_renewer"] = self._renewer  # renews the session lock while the worker holds it
            kwargs["session_id"] = NEXT_AVAILABLE_SESSION
            kwargs["max_wait_time"] = self.options.session_idle.total_seconds()
        if self.trigger.queue_name:
            return client.get_queue_receiver(self.trigger.queue_name, **kwargs)
        return client.get_subscription_receiver(
            self.trigger.topic_name or "", self.trigger.subscription_name or "", **kwargs
        )

    def _drain(self, receiver: ServiceBusReceiver) -> None:
        """Receive and process batches until stopped; a session receiver gives its session up once it has
        been idle for `sessionIdleTimeout`, so other sessions get their turn."""
        name = threading.current_thread().name
        idle_since = time.monotonic()
        while not self._stop.is_set():
            messages = next_batch(
                receiver,
                max_size=self.options.batch_size,
                min_size=self.options.min_batch_size,
                max_wait=self.options.batch_wait.total_seconds(),
                idle_wait=min(IDLE_RECEIVE_WAIT, self.options.session_idle).total_seconds(),
                prefetch=self.options.prefetch_count > 0,
            )
            if not messages:
                if (
                    self.trigger.sessions
                    and time.monotonic() - idle_since >= self.options.session_idle.total_seconds()
                ):
                    return
                continue
            self._holding.add(name)
            try:
                if self._stop.is_set():
                    return  # stopping: join may not wait for this worker; the locks lapse, nothing was done
                if self.trigger.many:
                    self._process(receiver, messages)
                else:
                    for message in messages:
                        self._process(receiver, [message])
            finally:
                self._holding.discard(name)
            idle_since = time.monotonic()

    # invoking and settling

    def _process(self, receiver: ServiceBusReceiver, messages: Sequence[ServiceBusReceivedMessage]) -> None:
        watched = self._renew_locks_if_slow(receiver, messages)
        try:
            self._invoke_and_settle(receiver, messages)
        finally:
            if watched is not None:
                self._lock_watch.cancel(watched)

    def _renew_locks_if_slow(
        self, receiver: ServiceBusReceiver, messages: Sequence[ServiceBusReceivedMessage]
    ) -> int | None:
        """Hand the batch's message locks to the AutoLockRenewer once the first of them is about to expire.
        Most batches settle long before; registering every message up front costs more than they take."""
        expiries = [m.locked_until_utc for m in messages if m.locked_until_utc]
        if self.trigger.sessions or not expiries:
            return None
        started = time.monotonic()
        remaining = (
            min(expiries) - dt.datetime.now(dt.UTC)
        ).total_seconds() - LOCK_RENEW_MARGIN.total_seconds()

        def register() -> None:
            budget = self.options.lock_renewal.total_seconds() - (time.monotonic() - started)
            if budget > 0:
                self._renew_unsettled(receiver, messages, budget)

        return self._lock_watch.watch(remaining, register)

    def _renew_unsettled(
        self, receiver: ServiceBusReceiver, messages: Sequence[ServiceBusReceivedMessage], budget: float
    ) -> None:
        """Register the batch's messages that still hold a lock; those settled meanwhile (the batch may be
        settling while this runs) have none left, and the SDK's renewer refuses them."""
        for message in messages:
            if message.locked_until_utc is None:
                continue
            try:
                self._renewer.register(receiver, message, max_lock_renewal_duration=budget)
            except (ValueError, ServiceBusError) as exc:  # settled since the check, or shutting down
                log.debug("%s: lock not renewed: %s", self.trigger.function_name, exc)

    def _invoke_and_settle(
        self, receiver: ServiceBusReceiver, messages: Sequence[ServiceBusReceivedMessage]
    ) -> None:
        argument: Any = [to_function_message(m) for m in messages]
        if not self.trigger.many:
            argument = argument[0]
        retry_number = 0
        while True:
            try:
                self.trigger.user_function(**{self.trigger.arg_name: argument})
            except PoisonMessageError as exc:
                self.stats.invocation_failed()
                self._settle_poison(receiver, messages, exc)
                return
            except Exception as exc:
                self.stats.invocation_failed()
                retry_number += 1
                policy = self.trigger.retry
                if policy is None or not policy.allows(retry_number) or self._stop.is_set():
                    log.error(
                        "%s: invocation failed, abandoning %d message(s): %s",
                        self.trigger.function_name,
                        len(messages),
                        exc,
                    )
                    self._settle(receiver, messages, receiver.abandon_message, "abandoned")
                    return
                delay = policy.delay(retry_number)
                log.warning(
                    "%s: invocation failed (%s); retry %d in %s",
                    self.trigger.function_name,
                    exc,
                    retry_number,
                    delay,
                )
                if self._stop.wait(delay.total_seconds()):
                    self._settle(receiver, messages, receiver.abandon_message, "abandoned")
                    return
                continue
            if self.options.auto_complete:
                self._record(complete_messages(receiver, messages), "completed")
            return

    def _settle_poison(
        self,
        receiver: ServiceBusReceiver,
        messages: Sequence[ServiceBusReceivedMessage],
        exc: PoisonMessageError,
    ) -> None:
        good = [m for m in messages if m.sequence_number not in exc.failures]
        bad = [m for m in messages if m.sequence_number in exc.failures]
        self._record(complete_messages(receiver, good), "completed")
        for message in bad:
            if exc.is_last_delivery(message.delivery_count):
                log.error(
                    "%s: dead-lettering MessageId %s: %s",
                    self.trigger.function_name,
                    message.message_id,
                    exc.description(message.sequence_number),
                )
                settle = _dead_letter(
                    exc.DEAD_LETTER_REASON, exc.description(message.sequence_number), receiver
                )
                self._settle(receiver, [message], settle, "dead-lettered")
            else:
                self._settle(receiver, [message], receiver.abandon_message, "abandoned")

    def _settle(
        self,
        receiver: ServiceBusReceiver,
        messages: Sequence[ServiceBusReceivedMessage],
        settle: Callable[[ServiceBusReceivedMessage], None],
        outcome: str,
    ) -> None:
        self._record(((message, _settled_by(settle, message)) for message in messages), outcome)

    def _record(
        self, results: Iterable[tuple[ServiceBusReceivedMessage, Exception | None]], outcome: str
    ) -> None:
        settled = []
        for message, exc in results:
            if exc is None:
                settled.append(message.enqueued_time_utc)
                continue
            # The lock is gone (expired, or the link dropped and the SDK shut the handler down): the
            # broker redelivers the message, and the target's duplicate detection absorbs the copy.
            self.stats.settle_failed()
            log.warning(
                "%s: could not settle MessageId %s (%s): %s",
                self.trigger.function_name,
                message.message_id,
                outcome,
                exc,
            )
        self.stats.settled(settled, outcome=outcome)

    def _lock_renew_failed(self, renewable: Any, error: Exception | None) -> None:
        # A message settled while its renewal was running has no lock left to lose (the SDK's renewer
        # then fails on its missing locked-until); anything else means the lock may expire.
        if error is not None and renewable.locked_until_utc is not None:
            log.warning("%s: lock renewal failed: %s", self.trigger.function_name, error)


def _settled_by(
    settle: Callable[[ServiceBusReceivedMessage], None], message: ServiceBusReceivedMessage
) -> Exception | None:
    try:
        settle(message)
    except (ServiceBusError, ValueError) as exc:
        return exc
    return None


def _dead_letter(
    reason: str, description: str, receiver: ServiceBusReceiver
) -> Callable[[ServiceBusReceivedMessage], None]:
    def settle(message: ServiceBusReceivedMessage) -> None:
        receiver.dead_letter_message(message, reason=reason, error_description=description)

    return settle
