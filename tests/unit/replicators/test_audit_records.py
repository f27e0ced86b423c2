"""Audit records in the docs/audit-log.md format, and the local-directory sink's layout."""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.pipeline.transport import HttpResponse, HttpTransport
from azure.servicebus import ServiceBusMessage
from sb_wire import received, roundtrip

from replicators.audit import AuditTap, BlobSink, DirectorySink, audit_record, partition_path
from replicators.copy import copy_message
from replicators.message import SourceMessage

OBSERVED = dt.datetime(2026, 11, 22, 12, 0, 1, 500000, tzinfo=dt.UTC)


def source(message, **broker) -> SourceMessage:
    return SourceMessage.from_received(received(message, **broker), namespace="primary", entity="events")


def test_record_carries_every_documented_field():
    msg = ServiceBusMessage(
        b"12345", message_id="m1", session_id="s", partition_key="s", time_to_live=dt.timedelta(seconds=90)
    )
    record = audit_record(source(msg, sequence_number=7), observed_time_utc=OBSERVED)
    assert record == {
        "event": "enqueued",
        "namespace": "primary",
        "entity": "events",
        "message_id": "m1",
        "enqueued_time_utc": "2026-11-22T12:00:00.123Z",
        "sequence_number": 7,
        "partition_key": "s",
        "session_id": "s",
        "size": 5,
        "ttl_seconds": 90.0,
        "observed_time_utc": "2026-11-22T12:00:01.500Z",
    }


def test_replica_record_carries_the_repl_stamps():
    first = copy_message(
        source(ServiceBusMessage(b"x", message_id="m1"), sequence_number=3), target_entity="events"
    )
    later = dt.datetime(2026, 11, 22, 12, 0, 2, tzinfo=dt.UTC)
    replica = SourceMessage.from_received(
        roundtrip(first.to_amqp(), sequence_number=90, enqueued_time_utc=later),
        namespace="secondary",
        entity="events",
    )
    record = audit_record(replica, observed_time_utc=OBSERVED)
    assert record["namespace"] == "secondary" and record["sequence_number"] == 90
    assert record["repl_enqueued_time"] == "2026-11-22T12:00:00.123Z"
    assert record["repl_sequence"] == "3"
    assert record["repl_source"] == "primary/events"
    assert "session_id" not in record and "ttl_seconds" not in record


def test_partition_path_is_hive_style_by_enqueued_hour_and_quotes_the_entity():
    record = {"namespace": "primary", "entity": "a/b c", "enqueued_time_utc": "2026-11-22T23:59:59.999Z"}
    assert partition_path(record) == "namespace=primary/entity=a%2Fb%20c/date=2026-11-22/hour=23"


def visible(root: Path) -> dict[str, list[str]]:
    """The published files (relative path → message ids): what a reader that skips `.`/`_` names sees."""
    return {f.relative_to(root).as_posix(): [json.loads(line)["message_id"] for line in f.read_text().split()]
            for f in sorted(root.rglob("*.jsonl")) if not f.name.startswith((".", "_"))}


def test_directory_sink_writes_one_file_per_writer_and_partition_published_on_close(tmp_path: Path):
    sink = DirectorySink(tmp_path, writer="audit-primary")
    tap = AuditTap(sink, clock=lambda: OBSERVED)
    at_12 = source(ServiceBusMessage(b"a", message_id="a"))
    at_13 = source(
        ServiceBusMessage(b"b", message_id="b"),
        enqueued_time_utc=dt.datetime(2026, 11, 22, 13, 5, tzinfo=dt.UTC),
    )
    assert tap.record([at_12, at_13]) == 2
    tap.record([source(ServiceBusMessage(b"c", message_id="c"))])
    assert visible(tmp_path) == {}
    assert len([f for f in tmp_path.rglob("*") if f.name.endswith(".jsonl.inprogress")]) == 2
    sink.close()
    files = visible(tmp_path)
    assert [name.rsplit("/", 1)[0] for name in files] == [
        "namespace=primary/entity=events/date=2026-11-22/hour=12",
        "namespace=primary/entity=events/date=2026-11-22/hour=13",
    ]
    assert all(name.rsplit("/", 1)[1].startswith("audit-primary-") for name in files)
    assert list(files.values()) == [["a", "c"], ["b"]]
    assert [f for f in tmp_path.rglob("*") if f.is_file() and f.name.startswith(".")] == []


def test_directory_sink_publishes_a_roll_once_it_is_roll_seconds_old(tmp_path: Path):
    now = [0.0]
    sink = DirectorySink(tmp_path, writer="tap", roll_seconds=10, clock=lambda: now[0])
    tap = AuditTap(sink, clock=lambda: OBSERVED)
    tap.record([source(ServiceBusMessage(b"a", message_id="a"))])
    now[0] = 9.9
    tap.record([source(ServiceBusMessage(b"b", message_id="b"))])
    assert visible(tmp_path) == {}
    now[0] = 10.0
    tap.record([source(ServiceBusMessage(b"c", message_id="c"))])  # the roll is due: published with it
    first = visible(tmp_path)
    assert list(first.values()) == [["a", "b", "c"]]
    tap.record([source(ServiceBusMessage(b"d", message_id="d"))])  # a new roll, a new file
    assert visible(tmp_path) == first
    sink.close()
    files = visible(tmp_path)
    assert sorted(files.values()) == [["a", "b", "c"], ["d"]]
    assert len({name.rsplit("/", 1)[1] for name in files}) == 2


def test_directory_sink_publishes_a_roll_of_an_idle_writer_without_another_write(tmp_path: Path):
    sink = DirectorySink(tmp_path, writer="tap", roll_seconds=0.05)
    AuditTap(sink, clock=lambda: OBSERVED).record([source(ServiceBusMessage(b"a", message_id="a"))])
    deadline = time.monotonic() + 10
    while not visible(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert list(visible(tmp_path).values()) == [["a"]]
    sink.close()
    assert list(visible(tmp_path).values()) == [["a"]]


KILLED_WRITER = """
import json, os, signal, sys
from replicators.audit import DirectorySink
sink = DirectorySink(sys.argv[1], writer=f"tap-{os.getpid()}", roll_seconds=3600)
sink.write(json.loads(sys.argv[2]))
os.kill(os.getpid(), signal.SIGKILL)  # mid-roll: nothing published, no clean shutdown
"""


def test_a_new_sink_publishes_what_a_killed_writer_left_exactly_once_and_a_live_ones_not(tmp_path: Path):
    records = [audit_record(source(ServiceBusMessage(b"a", message_id=i)), observed_time_utc=OBSERVED)
               for i in ("a", "b")]
    live = DirectorySink(tmp_path, writer="tap-2", roll_seconds=3600)
    AuditTap(live, clock=lambda: OBSERVED).record([source(ServiceBusMessage(b"x", message_id="x"))])
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(tmp_path), json.dumps(records)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert visible(tmp_path) == {}
    # a restarted host's sink has another writer name (a new pid): it publishes the killed process's files
    restarted = DirectorySink(tmp_path, writer="tap-3")
    assert list(visible(tmp_path).values()) == [["a", "b"]]  # not tap-2's: that sink is alive
    AuditTap(restarted, clock=lambda: OBSERVED).record([source(ServiceBusMessage(b"c", message_id="c"))])
    restarted.close()
    files = visible(tmp_path)
    assert sorted(files.values()) == [["a", "b"], ["c"]]
    DirectorySink(tmp_path, writer="tap-4").close()  # nothing left in progress: nothing published twice
    assert visible(tmp_path) == files
    live.close()
    assert sorted(visible(tmp_path).values()) == [["a", "b"], ["c"], ["x"]]
    assert not list(tmp_path.glob(".*.lock"))  # closed sinks and claimed orphans leave no lock behind


class RecordingTransport(HttpTransport):
    """Azure Storage's HTTP boundary, recorded: no storage account is reachable from the tests."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict, bytes]] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def send(self, request, **kwargs):
        self.requests.append((request.method, request.url, dict(request.headers), request.data or b""))
        return _Created(request)


class _Created(HttpResponse):
    def __init__(self, request) -> None:
        super().__init__(request, None)
        self.status_code, self.reason, self.content_type = 201, "Created", None
        self.headers = {"x-ms-request-id": "1", "Date": "Sun, 22 Nov 2026 12:00:00 GMT"}

    def body(self) -> bytes:
        return b""


def test_blob_sink_creates_one_append_blob_per_partition_and_appends_each_batch():
    transport = RecordingTransport()
    sink = BlobSink(
        "https://acct.blob.core.windows.net/audit/prod",
        writer="tap",
        credential=AzureNamedKeyCredential("acct", "a2V5"),
        transport=transport,
    )
    tap = AuditTap(sink, clock=lambda: OBSERVED)
    tap.record([source(ServiceBusMessage(b"a", message_id="a"))])
    tap.record([source(ServiceBusMessage(b"b", message_id="b"))])
    partition = "namespace=primary/entity=events/date=2026-11-22/hour=12"
    blob = f"https://acct.blob.core.windows.net/audit/prod/{partition}/{sink.file_name}"
    sent = [
        (method, unquote(url), headers.get("x-ms-blob-type"))
        for method, url, headers, _ in transport.requests
    ]
    assert sent == [
        ("PUT", blob, "AppendBlob"),
        ("PUT", f"{blob}?comp=appendblock", None),
        ("PUT", f"{blob}?comp=appendblock", None),
    ]
    assert [json.loads(body)["message_id"] for *_, body in transport.requests[1:]] == ["a", "b"]
    with pytest.raises(ValueError, match="names no container"):
        BlobSink(
            "https://acct.blob.core.windows.net/",
            writer="tap",
            credential=AzureNamedKeyCredential("a", "a2V5"),
        )
