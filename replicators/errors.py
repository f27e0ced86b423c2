"""Which send failures are worth retrying, and how: transient faults back off exponentially with jitter;
permanent ones (too large, not allowed, entity missing or disabled) fail fast so the host abandons the
batch and the message comes back later (or reaches the dead-letter queue) instead of blocking."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import tenacity
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusQuotaExceededError,
    ServiceBusServerBusyError,
)

log = logging.getLogger(__name__)

TRANSIENT = (
    ServiceBusServerBusyError,
    ServiceBusConnectionError,
    OperationTimeoutError,
    ServiceBusCommunicationError,
    ServiceBusQuotaExceededError,  # the target is full: it drains, so wait rather than fail
)
PERMANENT = (
    MessageSizeExceededError,
    ServiceBusAuthorizationError,
    ServiceBusAuthenticationError,
    MessagingEntityNotFoundError,
    MessagingEntityDisabledError,
)


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, TRANSIENT) and not isinstance(exc, PERMANENT)


@dataclass(frozen=True)
class SendRetryPolicy:
    """Backoff for transient send failures inside one invocation. After `deadline` the error goes to the
    host, whose function retry policy (exponential, unlimited) takes over without losing the message."""

    initial: dt.timedelta = dt.timedelta(milliseconds=200)
    maximum: dt.timedelta = dt.timedelta(seconds=10)
    deadline: dt.timedelta = dt.timedelta(minutes=2)
    jitter: dt.timedelta = dt.timedelta(milliseconds=200)

    def retrying(self, *, sleep: Callable[[float], None] = time.sleep) -> tenacity.Retrying:
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            wait=tenacity.wait_exponential_jitter(
                multiplier=self.initial.total_seconds(),
                max=self.maximum.total_seconds(),
                jitter=self.jitter.total_seconds(),
            ),
            stop=tenacity.stop_after_delay(self.deadline.total_seconds()),
            sleep=sleep,
            reraise=True,
            before_sleep=_log_retry,
        )


def _log_retry(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    wait = state.next_action.sleep if state.next_action else 0.0
    log.warning("send failed (attempt %d: %s); retrying in %.1fs", state.attempt_number, exc, wait)
