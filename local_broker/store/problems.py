"""What stops a namespace's store from opening, said in one line: which file, what is wrong, what to do.

SQLite names no file and says `file is not a database`, `database disk image is malformed` or `attempt to
write a readonly database`; the broker turns each into a `StoreError` the command line prints as it is (exit
2). A damaged file is left exactly as it was: the store fails while reading it, before any write reaches it
(its changes go to the write-ahead log first, and a failed open commits none).
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from local_broker.engine.errors import StoreError

DAMAGE = ("not a database", "malformed", "corrupt", "disk i/o error")
NO_ACCESS = ("readonly", "read-only", "unable to open", "permission denied")


def damaged(path: Path, namespace: str, reason: str) -> StoreError:
    data = path.parent
    return StoreError(
        f"{path}: the store of namespace {namespace} is damaged ({reason}); the file was not changed. "
        f"`sbfed broker check --data {data}` says what is wrong, `sbfed broker recover --data {data} "
        f"--namespace {namespace} --out NEWDIR` saves what can be read into a new store; or move the file "
        "away to start the namespace empty.")


def not_writable(path: Path | str, directory: Path, reason: str) -> StoreError:
    return StoreError(
        f"{path}: cannot write there ({reason}); the broker writes each namespace's store, its logs and "
        f"its reserve in {directory}: make it writable for this user (or mount it read-write), or choose "
        "another directory with --data.")


@contextmanager
def opening(path: Path, namespace: str) -> Iterator[None]:
    """What SQLite and the file system raise while the store at `path` opens, as a one-line StoreError."""
    try:
        yield
    except sqlite3.Error as exc:
        reason = str(exc)
        lowered = reason.lower()
        if any(word in lowered for word in NO_ACCESS):
            raise not_writable(path, path.parent, f"SQLite: {reason}") from None
        if any(word in lowered for word in DAMAGE) or isinstance(exc, sqlite3.DatabaseError):
            raise damaged(path, namespace, f"SQLite: {reason}") from None
        raise
    except ValueError as exc:  # a row SQLite reads but sbfed cannot decode (its JSON, its fields)
        raise damaged(path, namespace, f"a record cannot be read: {exc}") from None
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise not_writable(exc.filename or path, path.parent, exc.strerror or str(exc)) from None
        raise


@contextmanager
def writing(directory: Path) -> Iterator[None]:
    """Turn a refused write in the data directory (the certificate, the directory itself) into one line."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise not_writable(exc.filename or directory, directory, exc.strerror or str(exc)) from None
        raise
