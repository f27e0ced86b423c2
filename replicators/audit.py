"""Audit records (docs/audit-log.md): one JSON line per message an audit tap sees, written to a sink
partitioned by namespace/entity/date/hour of the message's EnqueuedTimeUtc. `spark_reconcile` reads them."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlparse

from replicators.message import SourceMessage
from replicators.stamps import REPL_ENQUEUED_TIME, REPL_SEQUENCE, REPL_SOURCE, iso_utc, read_stamp


def audit_record(
    message: SourceMessage, *, observed_time_utc: dt.datetime, event: str = "enqueued"
) -> dict[str, Any]:
    """The record for one message as `namespace` saw it; optional fields are left out when unknown."""
    record: dict[str, Any] = {
        "event": event,
        "namespace": message.namespace,
        "entity": message.entity,
        "message_id": message.message_id,
        "enqueued_time_utc": iso_utc(message.enqueued_time_utc),
        "sequence_number": message.sequence_number,
        "partition_key": message.partition_key,
        "session_id": message.session_id,
        "size": message.body.size,
        "ttl_seconds": message.time_to_live.total_seconds() if message.time_to_live else None,
        "repl_enqueued_time": read_stamp(message.application_properties, REPL_ENQUEUED_TIME),
        "repl_sequence": read_stamp(message.application_properties, REPL_SEQUENCE),
        "repl_source": read_stamp(message.application_properties, REPL_SOURCE),
        "observed_time_utc": iso_utc(observed_time_utc),
    }
    return {key: value for key, value in record.items() if value is not None}


def partition_path(record: Mapping[str, Any]) -> str:
    """`namespace=<ns>/entity=<quoted>/date=YYYY-MM-DD/hour=HH`, from the record's enqueued time."""
    enqueued = record["enqueued_time_utc"]
    return (
        f"namespace={quote(record['namespace'], safe='')}/entity={quote(record['entity'], safe='')}"
        f"/date={enqueued[:10]}/hour={enqueued[11:13]}"
    )


class AuditSink(Protocol):
    def write(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Durably append the records; return only once they are stored."""

    def close(self) -> None: ...


def _lines_by_partition(records: Iterable[Mapping[str, Any]]) -> dict[str, bytes]:
    lines: dict[str, list[str]] = defaultdict(list)
    for record in records:
        lines[partition_path(record)].append(json.dumps(record, separators=(",", ":"), ensure_ascii=False))
    return {path: ("\n".join(batch) + "\n").encode("utf-8") for path, batch in lines.items()}


class DirectorySink:
    """Appends to `<root>/<partition>/<writer>-<uuid>.jsonl`, one file per writer and partition, fsynced
    before `write` returns (the host completes the messages right after)."""

    def __init__(self, root: str | Path, writer: str) -> None:
        self.root = Path(root)
        self.file_name = f"{writer}-{uuid.uuid4().hex}.jsonl"
        self._lock = threading.Lock()

    def write(self, records: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            for partition, data in _lines_by_partition(records).items():
                directory = self.root / partition
                directory.mkdir(parents=True, exist_ok=True)
                with open(directory / self.file_name, "ab") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())

    def close(self) -> None:
        """Nothing stays open between writes."""


class BlobSink:
    """Append blobs under `https://<account>.blob.core.windows.net/<container>[/<prefix>]`, authenticated with
    the Functions app's identity (DefaultAzureCredential; Storage Blob Data Contributor on the container)."""

    def __init__(self, url: str, writer: str, credential: Any = None, **client_kwargs: Any) -> None:
        from azure.identity import DefaultAzureCredential
        from azure.storage.blob import ContainerClient

        parsed = urlparse(url)
        container, _, prefix = parsed.path.lstrip("/").partition("/")
        if not container:
            raise ValueError(
                f"audit sink '{url}' names no container: use https://<account>.blob.core.windows.net/<c>"
            )
        self._container = ContainerClient(
            f"{parsed.scheme}://{parsed.netloc}",
            container,
            credential=credential or DefaultAzureCredential(),
            **client_kwargs,
        )
        self._prefix = prefix.strip("/")
        self.file_name = f"{writer}-{uuid.uuid4().hex}.jsonl"
        self._created: set[str] = set()
        self._lock = threading.Lock()

    def write(self, records: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            for partition, data in _lines_by_partition(records).items():
                name = "/".join(part for part in (self._prefix, partition, self.file_name) if part)
                blob = self._container.get_blob_client(name)
                if name not in self._created:
                    blob.create_append_blob()
                    self._created.add(name)
                blob.append_block(data)

    def close(self) -> None:
        self._container.close()


def open_sink(location: str, writer: str) -> AuditSink:
    """A local directory, or an Azure Blob container URL."""
    if location.startswith("https://"):
        return BlobSink(location, writer)
    return DirectorySink(location, writer)


class AuditTap:
    """An `audit` task: records every message of its subscription; the host then completes them."""

    def __init__(self, sink: AuditSink, clock: Any = None) -> None:
        self._sink = sink
        self._now = clock or (lambda: dt.datetime.now(dt.UTC))

    def record(self, messages: Iterable[SourceMessage]) -> int:
        observed = self._now()
        records = [audit_record(message, observed_time_utc=observed) for message in messages]
        self._sink.write(records)
        return len(records)
