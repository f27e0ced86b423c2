"""Which files a log holds: the data files under its path, pruned by `date=`/`hour=` directories, and the
checks of its path and format. No Spark here: `reading` lists through Hadoop's FileSystem for any scheme,
and `cli` checks local paths with it before the JVM starts (a mistyped path costs no Spark start)."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from urllib.parse import unquote, urlsplit

from spark_reconcile.config import LogInput

DATA_SUFFIXES = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".ndjson": "json"}
Listing = Callable[[str], "list[tuple[str, bool, str]] | None"]  # (name, is a directory, path) or no path


class InputError(ValueError):
    """A log cannot be read as the audit log contract describes."""


def local_path(path: str, scheme_less_is_local: bool) -> str | None:
    """The local file system path of a log's path: a `file:` URI's, or a path without a scheme when such a
    path is on the local disk (not on a cluster whose default file system is HDFS); else None."""
    parts = urlsplit(path)
    if parts.scheme == "file":
        return unquote(parts.path)
    if ":" in path.split("/", 1)[0]:
        return None
    return path if scheme_less_is_local else None


def check_local(log: LogInput, start: datetime | None, end: datetime | None, stream: bool,
                scheme_less_is_local: bool) -> None:
    """What reading a local log would refuse, found without Spark: a path that does not exist, no data
    files, two formats, and (a stream, which cannot look at its files later) no files to tell the format."""
    path = local_path(log.path, scheme_less_is_local)
    if path is None:
        return
    local = LogInput(log.tag, path, log.format)
    _, files = files_under(local, local_listing, None if stream else start, None if stream else end)
    if stream and log.format == "auto" and not files:
        raise InputError(no_files_yet(log))


def no_files_yet(log: LogInput) -> str:
    return (f"log {log.tag!r}: no data files under {log.path} yet; pass --format json|parquet to follow a "
            "log that is still empty")


def files_under(log: LogInput, listing: Listing, start: datetime | None,
                end: datetime | None) -> tuple[str, list[str]]:
    """The format and the data files under the path whose `date=`/`hour=` directories may hold records in
    [start, end] (hour granularity: the first and last hours are read whole and trimmed by the row filter),
    `listing` giving each folder's entries (None: no such path)."""
    low = None if start is None else start.strftime("%Y-%m-%dT%H")
    high = None if end is None else end.strftime("%Y-%m-%dT%H")
    found: list[tuple[str, str]] = []
    others = pruned = 0
    pending = [(log.path, "")]
    while pending:
        folder, date = pending.pop()
        entries = listing(folder)
        if entries is None:
            raise InputError(f"log {log.tag!r}: path {log.path} does not exist")
        for name, is_dir, path in entries:
            if name.startswith(("_", ".")):
                continue
            if is_dir:
                where = _partition_bucket(name, date)
                if where is not None and not _may_hold(where, low, high):
                    pruned += 1
                    continue
                pending.append((path, where[0][:10] if where is not None else date))
                continue
            fmt = log.format if log.format != "auto" else next(
                (f for suffix, f in DATA_SUFFIXES.items() if name.endswith(suffix)), None)
            if fmt is None:
                others += 1
            else:
                found.append((fmt, path))
    formats = {f for f, _ in found}
    if not found and others and not pruned:
        raise InputError(f"log {log.tag!r}: no .jsonl/.json/.parquet files under {log.path}; "
                         "pass --format json|parquet if the files have other names")
    if len(formats) > 1:
        raise InputError(f"log {log.tag!r}: both JSON lines and Parquet files under {log.path}; "
                         "give each format its own --log")
    return (formats.pop() if formats else "json"), sorted(p for _, p in found)


def local_listing(folder: str) -> list[tuple[str, bool, str]] | None:
    """(name, is a directory, path) of a local folder's entries; a local file lists as itself."""
    if os.path.isfile(folder):
        return [(os.path.basename(folder), False, folder)]
    try:
        with os.scandir(folder) as entries:
            return [(e.name, e.is_dir(), e.path) for e in entries]
    except FileNotFoundError:
        return None


def _partition_bucket(name: str, date: str) -> tuple[str, bool] | None:
    """(`YYYY-MM-DD[THH]`, whole day?) for a `date=` or `hour=` directory, None for any other directory."""
    if name.startswith("date="):
        return name[5:], True
    if name.startswith("hour=") and date:
        return f"{date}T{name[5:].zfill(2)}", False
    return None


def _may_hold(where: tuple[str, bool], low: str | None, high: str | None) -> bool:
    bucket, whole_day = where
    if whole_day:
        return (low is None or bucket >= low[:10]) and (high is None or bucket <= high[:10])
    return (low is None or bucket >= low) and (high is None or bucket <= high)
