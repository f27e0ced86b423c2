"""Everything python-qpid-proton 0.40 needs help with to speak the Service Bus dialect.

servicebus-wire.md section 12 lists the pitfalls; each helper here is the workaround for one:
binary delivery tags (proton decodes tags as UTF-8), 3-field errors (proton drops an empty info map,
and the SDK hangs on a 2-field error), refusing a link with a null terminus, terminus filters and
.NET tick timestamps, the transfer's message-format (proton parses and drops it) and delivery-ids a client
sends out of sequence (`IncomingFrames` reads and mends the incoming frames).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import cproton_ffi
from proton import Condition, Delivery, Link, Terminus, Transport, symbol
from proton._condition import obj2cond
from proton._delivery import Disposition

from local_broker.wire.amqp import values

TRACKING_ID = symbol("com.microsoft:tracking-id")
LIB = _LIB = cproton_ffi.lib  # proton's C API, for the hot paths that skip its Python wrappers
_FFI = cproton_ffi.ffi
# proton's C calls, bound once: reading one from cffi's lib object costs ~225 instructions a time
pn_delivery_local = _LIB.pn_delivery_local
pn_delivery_remote = _LIB.pn_delivery_remote
pn_delivery_settle = _LIB.pn_delivery_settle
pn_delivery_tag = _LIB.pn_delivery_tag
pn_delivery_update = _LIB.pn_delivery_update
pn_disposition_condition = _LIB.pn_disposition_condition
pn_link_name = _LIB.pn_link_name
DOTNET_EPOCH_TICKS = 621_355_968_000_000_000


def delivery_tag(delivery: Any) -> bytes:
    """The raw delivery tag of a C delivery (SDK senders use 4-byte counters that are not valid UTF-8)."""
    tag = pn_delivery_tag(delivery)
    return bytes(_FFI.unpack(tag.start, tag.size)) if tag.size else b""  # an empty one starts at NULL


class IncomingFrames:
    """What proton needs help with in the frames a connection receives, read (and once in a while rewritten)
    before proton sees them.

    - The message-format of transfers: proton 0.40 neither exposes nor keeps it, yet it is what marks a batch
      (0x80013700) whatever the envelope holds. Attach frames name the client's links by (channel, handle),
      and a transfer with a non-zero message-format is remembered by (link name, delivery tag) until the
      endpoint asks for it (`take`).
    - Delivery-ids out of sequence: the Python SDK's threads (AutoLockRenewer renewing many locks at once)
      race on its session's counter and send two transfers with one delivery-id, or skip one. proton ends
      the session for that ("sequencing error"); Service Bus serves both requests. The first transfer of
      each new delivery on a session is renumbered to the id proton expects (the client settles on replies,
      not on those ids).

    Only frame headers and the first fields of begin, attach and transfer performatives are read; payloads
    pass without copying. `feed` returns the bytes to hand to proton: the start of a frame whose performative
    is still incomplete is held back until the rest arrives (a few hundred bytes at most).
    """

    BEGIN, ATTACH, TRANSFER = 0x11, 0x12, 0x14
    PERFORMATIVE_BYTES = 512  # enough for a transfer's first six fields (a tag is at most 32 bytes)

    def __init__(self) -> None:
        self.formats: dict[tuple[str, bytes], int] = {}  # (link name, delivery tag) -> message-format
        self.renumbered = 0  # transfers whose delivery-id was put back in sequence
        self._names: dict[tuple[int, int], str] = {}  # (channel, handle) -> the client's link name
        self._next_id: dict[int, int] = {}  # channel -> the delivery-id proton expects next
        self._partial: set[tuple[int, int]] = set()  # (channel, handle) with a delivery still arriving
        self._pending = b""  # the start of a frame whose performative is still incomplete
        self._skip = 0  # bytes of the current frame's payload still to pass over

    def take(self, link: Any, delivery: Any) -> int:
        """The message-format of a complete incoming C delivery (0 unless its transfer said otherwise)."""
        if not self.formats:
            return 0
        name = _FFI.string(pn_link_name(link)).decode("utf-8")
        return self.formats.pop((name, delivery_tag(delivery)), 0)

    def feed(self, data: bytes) -> bytes:
        if self._pending:  # a frame start that straddled two reads (a few hundred bytes at most)
            data, self._pending = self._pending + bytes(data), b""
        native = values._native
        if native is None:
            pos, self._skip, heads = _scan_frames(data, self._skip, self.PERFORMATIVE_BYTES)
        else:  # it counts the delivery-ids of the transfers _read_frame would only count
            pos, self._skip, heads = native.scan_frames(data, self._skip, self.PERFORMATIVE_BYTES,
                                                        self._next_id, self._partial)
        view, end = memoryview(data), len(data)
        if pos < end:
            self._pending = bytes(view[pos:end])
        out: list[bytes] | None = None  # the rewritten stream, once a frame had to change
        done = 0  # data[:done] is in `out` already
        for at, head in heads:
            rewritten = self._read_frame(view[at:at + head])
            if rewritten is not None:
                out = out if out is not None else []
                out += (bytes(view[done:at]), rewritten)
                done = at + head
        if out is None:
            return data if pos == end else bytes(view[:pos])
        out.append(bytes(view[done:pos]))
        return b"".join(out)

    def _read_frame(self, frame: memoryview) -> bytes | None:
        """Note what a begin, attach or transfer frame says (`_scan_frames` finds them); the frame's head
        rewritten, when it must change."""
        body = frame[4] * 4
        code = frame[body + 2]
        channel = struct.unpack_from(">H", frame, 6)[0]
        if code == self.BEGIN:
            self._next_id.pop(channel, None)
            return None
        try:
            fields, spans = _list_fields(frame, body + 3, 3 if code == self.ATTACH else 6)
        except (IndexError, struct.error, ValueError):
            return None  # proton reports malformed frames itself
        if code == self.ATTACH:
            if len(fields) >= 3 and fields[2] is False:  # role sender: the client transfers on it
                self._names[(channel, fields[1])] = fields[0]
                self._partial.discard((channel, fields[1]))
            return None
        if not fields or not isinstance(fields[0], int):
            return None
        link = (channel, fields[0])
        if len(fields) >= 4 and fields[3] and fields[2] is not None:
            name = self._names.get(link)
            if name is not None:
                self.formats[(name, fields[2])] = fields[3]
        starts = link not in self._partial
        if len(fields) >= 6 and fields[5] is True:
            self._partial.add(link)
        else:
            self._partial.discard(link)
        delivery_id = fields[1] if len(fields) >= 2 else None
        if not starts or not isinstance(delivery_id, int):
            return None
        expected = self._next_id.get(channel, delivery_id)
        self._next_id[channel] = (expected + 1) & 0xFFFFFFFF
        if delivery_id == expected:
            return None
        try:
            rewritten = _with_field(frame, body + 3, spans[1], _uint(expected))
        except (IndexError, struct.error, ValueError):
            return None  # left to proton
        self.renumbered += 1
        return rewritten


_READ_PERFORMATIVES = (IncomingFrames.BEGIN, IncomingFrames.ATTACH, IncomingFrames.TRANSFER)


def _scan_frames(data: bytes, skip: int, head_max: int) -> tuple[int, int, list[tuple[int, int]]]:
    """The frames of `data` whose heads `IncomingFrames` reads (begin, attach, transfer), as (position, head
    length); the reference of the C `scan_frames`. `skip` bytes of a frame begun before are passed over, then
    each frame's first min(size, head_max) bytes are its head; the walk stops before a head not all in
    `data`. Returns where it stopped, the bytes of the last frame still to pass over, and the heads."""
    view, pos, end = memoryview(data), 0, len(data)
    heads: list[tuple[int, int]] = []
    while pos < end:
        if skip:
            step = min(skip, end - pos)
            skip -= step
            pos += step
            continue
        if end - pos < 8:
            break
        if view[pos:pos + 4] == b"AMQP":  # the protocol header, not a frame
            pos += 8
            continue
        size = max(8, struct.unpack_from(">I", view, pos)[0])
        head = min(size, head_max)
        if end - pos < head:
            break
        body = view[pos + 4] * 4  # an empty (heartbeat) frame, or not an AMQP performative, is not read
        if (view[pos + 5] == 0 and head >= body + 3 and view[pos + body:pos + body + 2] == b"\x00\x53"
                and view[pos + body + 2] in _READ_PERFORMATIVES):
            heads.append((pos, head))
        pos += head
        skip = size - head
    return pos, skip, heads


def _uint(value: int) -> bytes:
    return b"\x52" + bytes((value,)) if value < 256 else b"\x70" + struct.pack(">I", value)


def _with_field(frame: memoryview, list_at: int, span: tuple[int, int], encoded: bytes) -> bytes:
    """`frame` (a frame's head) with the list field at `span` replaced by `encoded`: same-width values in
    place, others by re-encoding the list as a list32 and the frame's size to match."""
    start, stop = span
    if stop - start == len(encoded):
        return bytes(frame[:start]) + encoded + bytes(frame[stop:])
    code = frame[list_at]
    if code == 0xC0:
        size, count, items_at = frame[list_at + 1], frame[list_at + 2], list_at + 3
        list_end = list_at + 2 + size
    else:
        size, count = struct.unpack_from(">II", frame, list_at + 1)
        items_at, list_end = list_at + 9, list_at + 5 + size
    if list_end > len(frame):
        raise ValueError("the performative does not fit the head read")
    items = bytes(frame[items_at:start]) + encoded + bytes(frame[stop:list_end])
    performative = b"\xd0" + struct.pack(">II", len(items) + 4, count) + items
    grown = len(performative) - (list_end - list_at)
    frame_size = struct.unpack_from(">I", frame, 0)[0] + grown
    return (struct.pack(">I", frame_size) + bytes(frame[4:list_at]) + performative + bytes(frame[list_end:]))


_UINTS = {0x43: (0, None), 0x52: (1, struct.Struct(">B")), 0x70: (4, struct.Struct(">I"))}


def _list_fields(buf: memoryview, pos: int, wanted: int) -> tuple[list[Any], list[tuple[int, int]]]:
    """Up to `wanted` first fields of the list at `pos`, as begin, attach and transfer start with them: uints,
    a binary tag, a string name, booleans, nulls; reading stops at any other type. With each field, the
    span of bytes it takes."""
    code = buf[pos]
    if code == 0x45:
        return [], []
    if code == 0xC0:
        count, pos = buf[pos + 2], pos + 3
    elif code == 0xD0:
        count, pos = struct.unpack_from(">I", buf, pos + 5)[0], pos + 9
    else:
        raise ValueError(f"not a list: 0x{code:02x}")
    fields: list[Any] = []
    spans: list[tuple[int, int]] = []
    for _ in range(min(count, wanted)):
        start, code = pos, buf[pos]
        if code in _UINTS:
            width, unpack = _UINTS[code]
            fields.append(0 if unpack is None else unpack.unpack_from(buf, pos + 1)[0])
            pos += 1 + width
        elif code in (0xA0, 0xA1):
            end = pos + 2 + buf[pos + 1]
            raw = bytes(buf[pos + 2:end])
            fields.append(raw if code == 0xA0 else raw.decode("utf-8"))
            pos = end
        elif code in (0xB0, 0xB1):
            end = pos + 5 + struct.unpack_from(">I", buf, pos + 1)[0]
            raw = bytes(buf[pos + 5:end])
            fields.append(raw if code == 0xB0 else raw.decode("utf-8"))
            pos = end
        elif code in (0x41, 0x42):
            fields.append(code == 0x41)
            pos += 1
        elif code == 0x56:
            fields.append(buf[pos + 1] != 0)
            pos += 2
        elif code == 0x40:
            fields.append(None)
            pos += 1
        else:
            break  # a type these fields never have: the fields so far are all there is to read
        spans.append((start, pos))
    return fields, spans


class BrokerTransport(Transport):
    """proton's server transport, fed through `IncomingFrames` (`transfer_formats`)."""

    def __init__(self) -> None:
        super().__init__(Transport.SERVER)
        self.transfer_formats = IncomingFrames()

    def push(self, binary: bytes) -> None:
        super().push(self.transfer_formats.feed(binary))


def error(condition: str, description: str) -> Condition:
    """An AMQP error with all three fields: the info map carries a tracking id, as Service Bus does."""
    return Condition(symbol(condition), description, {TRACKING_ID: str(uuid.uuid4())})


def refuse_link(link: Link, condition: str, description: str) -> None:
    """Attach with a null terminus, then detach with the error: how the SDK learns a link was refused."""
    link.source.copy(link.remote_source)
    link.target.copy(link.remote_target)
    (link.target if link.is_receiver else link.source).type = Terminus.UNSPECIFIED
    if link.is_sender:
        link.snd_settle_mode = link.remote_snd_settle_mode
    link.open()
    link.condition = error(condition, description)
    link.close()


def echo_attach(link: Link) -> None:
    """Copy the client's source, target and settlement modes: the SDKs reject an attach with a null terminus,
    and go-amqp one whose settlement modes differ from those it asked for (Service Bus echoes them)."""
    link.source.copy(link.remote_source)
    link.target.copy(link.remote_target)
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = link.remote_rcv_settle_mode


def read_filter(terminus: Terminus) -> dict[Any, Any] | None:
    """The filter map of a source terminus (session receivers put their session id there)."""
    data = terminus.filter
    data.rewind()
    if not data.next():
        return None
    value = data.get_object()
    return dict(value) if isinstance(value, dict) else None


def write_filter(terminus: Terminus, filters: dict[Any, Any]) -> None:
    terminus.filter.clear()
    terminus.filter.put_dict(filters)


def dotnet_ticks(epoch_seconds: float) -> int:
    """A .NET DateTime in ticks (100 ns since 0001-01-01), as `com.microsoft:locked-until-utc` needs."""
    return int(epoch_seconds * 10_000_000) + DOTNET_EPOCH_TICKS


def remote_disposition(delivery: Any) -> Disposition:
    """The outcome fields the peer set on a C delivery (modified and rejected carry some)."""
    return Disposition(pn_delivery_remote(delivery), False)


def reject(delivery: Any, condition: str, description: str) -> None:
    """Settle a C delivery as rejected with a 3-field error."""
    obj2cond(error(condition, description), pn_disposition_condition(pn_delivery_local(delivery)))
    pn_delivery_update(delivery, Delivery.REJECTED)
    pn_delivery_settle(delivery)
