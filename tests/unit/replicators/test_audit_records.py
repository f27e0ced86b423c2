"""Audit records in the docs/audit-log.md format, and the local-directory sink's layout."""

from __future__ import annotations

import datetime as dt
import json
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


def test_directory_sink_appends_one_file_per_writer_and_partition(tmp_path: Path):
    sink = DirectorySink(tmp_path, writer="audit-primary")
    tap = AuditTap(sink, clock=lambda: OBSERVED)
    at_12 = source(ServiceBusMessage(b"a", message_id="a"))
    at_13 = source(
        ServiceBusMessage(b"b", message_id="b"),
        enqueued_time_utc=dt.datetime(2026, 11, 22, 13, 5, tzinfo=dt.UTC),
    )
    assert tap.record([at_12, at_13]) == 2
    tap.record([source(ServiceBusMessage(b"c", message_id="c"))])
    files = sorted(tmp_path.rglob("*.jsonl"))
    assert [f.relative_to(tmp_path).parent.as_posix() for f in files] == [
        "namespace=primary/entity=events/date=2026-11-22/hour=12",
        "namespace=primary/entity=events/date=2026-11-22/hour=13",
    ]
    assert all(f.name.startswith("audit-primary-") for f in files)
    lines = files[0].read_text().splitlines()
    assert [json.loads(line)["message_id"] for line in lines] == ["a", "c"]
    second_writer = DirectorySink(tmp_path, writer="audit-primary")
    assert second_writer.file_name != sink.file_name


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
