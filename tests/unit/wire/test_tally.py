"""How the AMQP endpoint (and the REST door) classes a request's failure (Azure Monitor's UserErrors,
ServerErrors, ThrottledRequests) and buckets its latency."""

from __future__ import annotations

import threading
import time

import pytest

from local_broker.engine.errors import (
    EntityNotFoundError,
    MessageLockLostError,
    OperationTimeoutError,
    ServerBusyError,
    StoreWriteError,
    UnauthorizedError,
)
from local_broker.wire.amqp.tally import LATENCY_BOUNDS, Histogram, Requests
from local_broker.wire.rest.tally import RestRequests


@pytest.mark.parametrize(("error", "counted"), [
    (EntityNotFoundError("no such queue"), "user_errors"),
    (UnauthorizedError("wrong key"), "user_errors"),
    (MessageLockLostError(), "user_errors"),
    (ServerBusyError("partition down"), "throttled"),
    (StoreWriteError("disk"), "server_errors"),
    (OperationTimeoutError("no session"), None),  # a receiver's wait ran out: no error
])
def test_a_failure_is_counted_once_in_its_class(error, counted) -> None:
    requests = Requests(incoming=1)
    requests.failed(error)
    classes = {"user_errors": requests.user_errors, "server_errors": requests.server_errors,
               "throttled": requests.throttled}
    assert classes == {name: int(name == counted) for name in classes}
    assert requests.successful == (1 if counted is None else 0)


def test_a_management_reply_is_classed_by_its_status_and_condition() -> None:
    requests = Requests(incoming=4)
    requests.answered(404, "amqp:not-found")
    requests.answered(500, "amqp:internal-error")
    requests.answered(503, ServerBusyError.amqp_condition)
    requests.answered(408, OperationTimeoutError.amqp_condition)
    counts = (requests.user_errors, requests.server_errors, requests.throttled, requests.successful)
    assert counts == (1, 1, 1, 1)


def test_latencies_fall_in_their_buckets_weighted_by_how_many_waited() -> None:
    histogram = Histogram()
    histogram.observe(0.0004)  # under the first bound
    histogram.observe(0.003, times=10)  # a turn that answered ten sends
    histogram.observe(LATENCY_BOUNDS[-1] * 2)  # beyond the last: +Inf
    assert histogram.count == 12 and histogram.sum == pytest.approx(0.0004 + 0.03 + LATENCY_BOUNDS[-1] * 2)
    assert histogram.buckets[0] == 1 and histogram.buckets[LATENCY_BOUNDS.index(0.005)] == 10
    assert histogram.buckets[-1] == 1 and sum(histogram.buckets) == 12


def test_rest_requests_answered_on_many_threads_are_all_counted() -> None:
    """HTTP handler threads and the reactor answer REST requests at once: no count may be lost."""
    requests = RestRequests()
    started = time.perf_counter()

    def answer(n: int) -> None:
        for i in range(n):
            failure = MessageLockLostError() if i % 10 == 0 else None
            requests.answered("complete", 404 if failure else 200, failure, started)

    threads = [threading.Thread(target=answer, args=(2000,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts = requests.snapshot()
    assert counts.incoming["complete"] == 16000
    assert counts.errors == {("complete", "user_errors", 404): 1600}
    assert counts.successful("complete") == 14400 and counts.latency["complete"].count == 16000
    assert counts.latency["send"].count == 0 and "peek_lock" not in counts.latency  # a long poll's wait


def test_a_rest_failure_is_classed_as_the_amqp_doors() -> None:
    requests = RestRequests()
    for status, failure in ((503, ServerBusyError("down")), (503, StoreWriteError("disk")), (201, None)):
        requests.answered("send", status, failure, time.perf_counter())
    counts = requests.snapshot()
    assert counts.errors == {("send", "throttled", 503): 1, ("send", "server_errors", 503): 1}
    assert counts.successful("send") == 1
