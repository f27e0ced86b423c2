"""Rows read straight from the table leaf pages of an SQLite file, for `recover`, where SQLite cannot reach
them.

When a table's interior pages are lost (a truncated file loses the pages SQLite added last, and a growing
table's root moves its children there), its leaf pages may still be whole. This walks every page of the file
(the SQLite file format: https://www.sqlite.org/fileformat2.html), skips the free list, and yields the rowid
and values of each cell of each table leaf page (overflow chains followed; a cell whose chain is broken is
skipped). Which table a row belongs to is for the caller to tell (by its shape).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

HEADER = 100
TABLE_LEAF = 0x0D


def leaf_rows(data: bytes) -> Iterator[tuple[int, list[Any]]]:
    """(rowid, values) of every cell on every table leaf page of the database file `data`."""
    if len(data) < HEADER or not data.startswith(b"SQLite format 3\0"):
        return
    page_size = struct.unpack_from(">H", data, 16)[0]
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - data[20]
    pages = len(data) // page_size
    free = _free_pages(data, page_size, pages)
    for number in range(1, pages + 1):
        if number in free:
            continue
        start = (number - 1) * page_size
        at = start + (HEADER if number == 1 else 0)
        if data[at] != TABLE_LEAF:
            continue
        cells = struct.unpack_from(">H", data, at + 3)[0]
        for index in range(cells):
            try:
                pointer = struct.unpack_from(">H", data, at + 8 + 2 * index)[0]
                yield _cell(data, start + pointer, page_size, usable, pages)
            except (IndexError, ValueError, struct.error, UnicodeDecodeError):
                continue  # a damaged cell


def _free_pages(data: bytes, page_size: int, pages: int) -> set[int]:
    free: set[int] = set()
    trunk = struct.unpack_from(">I", data, 32)[0]
    while 0 < trunk <= pages and trunk not in free:
        free.add(trunk)
        at = (trunk - 1) * page_size
        following, count = struct.unpack_from(">II", data, at)
        free.update(struct.unpack_from(f">{min(count, page_size // 4 - 2)}I", data, at + 8))
        trunk = following
    return free


def _cell(data: bytes, at: int, page_size: int, usable: int, pages: int) -> tuple[int, list[Any]]:
    size, at = _varint(data, at)
    rowid, at = _varint(data, at)
    local = _local_size(size, usable)
    payload = bytearray(data[at:at + local])
    if local < size:  # the rest is on a chain of overflow pages
        following = struct.unpack_from(">I", data, at + local)[0]
        while len(payload) < size:
            if not 0 < following <= pages:
                raise ValueError("broken overflow chain")
            page = (following - 1) * page_size
            following = struct.unpack_from(">I", data, page)[0]
            payload += data[page + 4:page + 4 + min(usable - 4, size - len(payload))]
    if rowid >= 1 << 63:
        rowid -= 1 << 64
    return rowid, _record(bytes(payload))


def _local_size(size: int, usable: int) -> int:
    most = usable - 35
    if size <= most:
        return size
    least = (usable - 12) * 32 // 255 - 23
    local = least + (size - least) % (usable - 4)
    return local if local <= most else least


def _record(payload: bytes) -> list[Any]:
    header, at = _varint(payload, 0)
    types = []
    while at < header:
        serial, at = _varint(payload, at)
        types.append(serial)
    values: list[Any] = []
    at = header
    for serial in types:
        if serial in (0, 8, 9):
            values.append(None if serial == 0 else serial - 8)
        elif serial <= 6:
            width = (1, 2, 3, 4, 6, 8)[serial - 1]
            values.append(int.from_bytes(payload[at:at + width], "big", signed=True))
            at += width
        elif serial == 7:
            values.append(struct.unpack_from(">d", payload, at)[0])
            at += 8
        elif serial >= 12:
            width = (serial - 12) // 2
            raw = payload[at:at + width]
            if len(raw) < width:
                raise ValueError("record cut short")
            values.append(raw if serial % 2 == 0 else raw.decode("utf-8"))
            at += width
        else:
            raise ValueError(f"serial type {serial}")
    return values


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for index in range(9):
        byte = data[at + index]
        if index == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + index + 1
    raise ValueError("varint")
