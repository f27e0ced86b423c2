"""Audit records (docs/audit-log.md): one JSON line per message an audit tap sees, written to a sink
partitioned by namespace/entity/date/hour of the message's EnqueuedTimeUtc. `spark_reconcile` reads them."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
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


_IN_PROGRESS = ".inprogress"
_OWNER_LOCK = ".lock"
# `.<writer>-<instance>-<roll>.jsonl.inprogress`: the owner is the sink instance that writes it.
_IN_PROGRESS_NAME = re.compile(rf"\.(?P<owner>.+-[0-9a-f]{{12}})-\d+\.jsonl{re.escape(_IN_PROGRESS)}")


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
    """Writes `<root>/<partition>/<writer>-<instance>-<roll>.jsonl`, one file per writer, partition and roll,
    so a file is complete when it becomes visible (Spark's file source, behind `reconcile --follow`, reads a
    file once). A roll's records are appended, fsynced before `write` returns (the host completes the messages
    right after), to `.<final name>.inprogress`, a name readers skip, and renamed to the final name once the
    roll is `roll_seconds` old (checked on each write and by a timer, for a writer gone idle) and on close.

    Each sink holds an flock on `<root>/.<writer>-<instance>.lock` while it lives (the OS drops it with a
    killed process); a new sink on the same root, whatever its writer name (a restarted host's has a new pid),
    first publishes the in-progress files of every sink whose lock is free: nothing a killed writer stored
    stays hidden, and nothing a live one is writing is published early."""

    def __init__(self, root: str | Path, writer: str, roll_seconds: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.root = Path(root)
        self.writer = writer
        self.roll_seconds = roll_seconds
        self._instance = uuid.uuid4().hex[:12]
        self._clock = clock
        self._lock = threading.Lock()
        self._roll = 0
        self._opened_at: float | None = None  # None: no file in progress
        self._in_progress: list[Path] = []
        self._timer: threading.Timer | None = None
        self.root.mkdir(parents=True, exist_ok=True)
        self._owner = f"{writer}-{self._instance}"
        self._owner_lock: int | None = _claim(self._owner_lock_path(self._owner))
        with self._lock:
            self._publish_orphans()

    @property
    def file_name(self) -> str:
        """The final name of the current roll's files."""
        return f"{self.writer}-{self._instance}-{self._roll}.jsonl"

    def write(self, records: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            for partition, data in _lines_by_partition(records).items():
                directory = self.root / partition
                directory.mkdir(parents=True, exist_ok=True)
                path = directory / f".{self.file_name}{_IN_PROGRESS}"
                if path not in self._in_progress:
                    self._in_progress.append(path)
                with open(path, "ab") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
            if self._in_progress and self._opened_at is None:
                self._opened_at = self._clock()
                self._timer = threading.Timer(self.roll_seconds, self._roll_when_due, (self._roll,))
                self._timer.daemon = True
                self._timer.start()
            if self._opened_at is not None and self._clock() - self._opened_at >= self.roll_seconds:
                self._end_roll()

    def close(self) -> None:
        """Publishes the roll in progress and lets go of the owner lock."""
        with self._lock:
            self._end_roll()
            if self._owner_lock is not None:
                _release(self._owner_lock_path(self._owner), self._owner_lock)
                self._owner_lock = None

    def _roll_when_due(self, roll: int) -> None:
        with self._lock:
            if self._roll == roll:
                self._end_roll()

    def _end_roll(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._in_progress:
            self._publish(self._in_progress)
            self._roll += 1
        self._in_progress, self._opened_at = [], None

    def _owner_lock_path(self, owner: str) -> Path:
        return self.root / f".{owner}{_OWNER_LOCK}"

    def _publish_orphans(self) -> None:
        """Publish the in-progress files of every sink under the root that is gone (its lock is free)."""
        by_owner: dict[str, list[Path]] = defaultdict(list)
        for folder, _, names in os.walk(self.root):
            for name in names:
                match = _IN_PROGRESS_NAME.fullmatch(name)
                if match and match["owner"] != self._owner:
                    by_owner[match["owner"]].append(Path(folder, name))
        for owner, paths in by_owner.items():
            held = _claim(self._owner_lock_path(owner))
            if held is not None:  # its sink is gone: no one else writes these files
                self._publish(paths)
                _release(self._owner_lock_path(owner), held)

    @staticmethod
    def _publish(paths: Iterable[Path]) -> None:
        for path in paths:
            try:
                os.rename(path, path.with_name(path.name[1:-len(_IN_PROGRESS)]))
            except FileNotFoundError:  # another new sink published this orphan first
                pass


def _claim(path: Path) -> int | None:
    """An exclusive flock on `path` (created if missing), or None if another open sink holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _release(path: Path, fd: int) -> None:
    path.unlink(missing_ok=True)
    os.close(fd)


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
