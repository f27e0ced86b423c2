"""proton's C calls on the hot path made from the C module (`_speedups`) with the GIL held.

Each cffi call into proton releases the GIL and takes it back (~1 k instructions, ~200 ns while the broker's
other threads exist), and turning one of cffi's pointers into an address for C costs more than the call.
`bound()` hands the C module proton's functions by address and cffi's pointer types once; its functions
then read the pointers the handlers hold directly. The pure-Python functions here are the reference, and
what runs when the module is not built or `SBFED_PURE_PYTHON` is set.
"""

from __future__ import annotations

from typing import Any

import cproton_ffi
from proton import Event

from local_broker.wire.amqp import compat, values

_LIB, _FFI = cproton_ffi.lib, cproton_ffi.ffi
CALLS = ("pn_transport_pending", "pn_transport_peek", "pn_transport_pop", "pn_transport_capacity",
         "pn_transport_close_head", "pn_link_is_sender", "pn_link_advance", "pn_delivery_partial",
         "pn_delivery_readable", "pn_delivery_pending", "pn_link_recv", "pn_link_credit", "pn_link_state",
         "pn_link_flow", "pn_delivery_update", "pn_delivery_settle", "pn_decref", "pn_delivery_remote_state",
         "pn_delivery_local", "pn_delivery_remote", "pn_disposition_is_failed",
         "pn_disposition_is_undeliverable", "pn_disposition_set_failed", "pn_disposition_set_undeliverable",
         "pn_delivery_tag", "pn_delivery_settled", "pn_delivery", "pn_link_send", "pn_collector_peek",
         "pn_collector_pop", "pn_event_type", "pn_event_transport", "pn_event_connection",
         "pn_connection_attachments", "pn_link_attachments", "pn_record_get_py",
         "pn_event_delivery", "pn_event_link", "pn_incref")
pn_decref = _LIB.pn_decref
pn_delivery = _LIB.pn_delivery
pn_delivery_local = _LIB.pn_delivery_local
pn_delivery_partial = _LIB.pn_delivery_partial
pn_delivery_pending = _LIB.pn_delivery_pending
pn_delivery_readable = _LIB.pn_delivery_readable
pn_delivery_remote = _LIB.pn_delivery_remote
pn_delivery_remote_state = _LIB.pn_delivery_remote_state
pn_delivery_settle = _LIB.pn_delivery_settle
pn_delivery_settled = _LIB.pn_delivery_settled
pn_delivery_update = _LIB.pn_delivery_update
pn_disposition_is_failed = _LIB.pn_disposition_is_failed
pn_disposition_is_undeliverable = _LIB.pn_disposition_is_undeliverable
pn_disposition_set_failed = _LIB.pn_disposition_set_failed
pn_disposition_set_undeliverable = _LIB.pn_disposition_set_undeliverable
pn_link_advance = _LIB.pn_link_advance
pn_link_credit = _LIB.pn_link_credit
pn_link_flow = _LIB.pn_link_flow
pn_link_is_sender = _LIB.pn_link_is_sender
pn_link_recv = _LIB.pn_link_recv
pn_link_send = _LIB.pn_link_send
pn_link_state = _LIB.pn_link_state
pn_link_attachments = _LIB.pn_link_attachments
pn_event_delivery = _LIB.pn_event_delivery
pn_event_link = _LIB.pn_event_link
pn_incref = _LIB.pn_incref
pn_record_get_py = _LIB.pn_record_get_py
PN_LOCAL_ACTIVE = _LIB.PN_LOCAL_ACTIVE
PN_MODIFIED = _LIB.PN_MODIFIED
_EVENTS = (Event.DELIVERY.number, Event.LINK_FLOW.number, Event.TRANSPORT_CLOSED.number)  # the C drain's
_bound: dict[int, Any] = {}  # id(the C module) -> it, once proton's calls are bound into it


def bound() -> Any:
    """The C module with proton's calls bound into it, or None with the pure-Python codec."""
    module = values._native
    return None if module is None else bind(module)


def bind(module: Any) -> Any:
    """`module` (the C module) with proton's calls bound into it, once."""
    if id(module) not in _bound:
        calls = {name: int(_FFI.cast("uintptr_t", _FFI.addressof(_LIB, name))) for name in CALLS}
        known = id(calls)  # an address the C module compares the pointers' with
        held = object()  # a handle's object, to check how cffi lays handles out
        module.bind_proton(calls, *(_FFI.cast(f"pn_{kind}_t *", known)
                                    for kind in ("link", "delivery", "event", "transport")),
                           _FFI.new_handle(held), held, _EVENTS)
        _bound[id(module)] = module
    return module


def link_state(link: Any) -> Any:
    """What the broker keeps on a C link as `sb` (proton's Python wrappers keep their attributes in the C
    object's record), or None."""
    record = pn_record_get_py(pn_link_attachments(link))
    return None if record == _FFI.NULL else _FFI.from_handle(record).get("sb")


def delivery_event(event: Any) -> tuple[Any, Any, Any]:
    """(delivery, link, the link's state or None) of a C DELIVERY event."""
    link = pn_event_link(event)
    return pn_event_delivery(event), link, link_state(link)


def flow_event(event: Any) -> tuple[Any, Any] | None:
    """(link, its state) of a C LINK_FLOW event whose link is open on the broker's side, has credit and a
    state; else None."""
    link = pn_event_link(event)
    if link == _FFI.NULL or pn_link_credit(link) <= 0 or not pn_link_state(link) & PN_LOCAL_ACTIVE:
        return None
    state = link_state(link)
    return None if state is None else (link, state)


def keep_unsettled(delivery: Any, kept: list[Any]) -> None:
    """Settle a C delivery the client settled itself; reference any other into `kept` (the connection may
    be freed before the commit after which it is settled)."""
    if pn_delivery_settled(delivery):
        pn_delivery_settle(delivery)
    else:
        pn_incref(delivery)
        kept.append(delivery)


def delivery_in(link: Any, delivery: Any, credit_target: int) -> bytes | bool | tuple[int, bool, bytes]:
    """What the endpoint does first with a C delivery event. When `link` is the broker's sender (the client's
    disposition of a delivery the broker sent): (its remote outcome, settled, the delivery tag). Else False
    while the transfer is still arriving, else its payload; the link moves on to its next delivery and, with
    `credit_target`, gets its credit back to it once it fell under half of it (a client sends on without
    waiting for flow frames)."""
    if pn_link_is_sender(link):
        tag = compat.delivery_tag(delivery)
        return pn_delivery_remote_state(delivery), pn_delivery_settled(delivery), tag
    if pn_delivery_partial(delivery) or not pn_delivery_readable(delivery):
        return False
    size = pn_delivery_pending(delivery)
    payload = bytearray(size)
    got = pn_link_recv(link, _FFI.from_buffer(payload), size)
    pn_link_advance(link)
    if credit_target:
        credit = pn_link_credit(link)
        if credit < credit_target // 2 and pn_link_state(link) & PN_LOCAL_ACTIVE:
            pn_link_flow(link, credit_target - credit)
    return bytes(payload) if got == size else bytes(payload[:max(got, 0)])


def send_raw(link: Any, tag: bytes, payload: bytes, settled: bool) -> None:
    """Transfer already-encoded bytes on the broker's C sender `link` as a new delivery; proton splits them
    into frames of the peer's max-frame-size (no Python `Delivery` wrapper: events about the delivery make
    one when they come)."""
    delivery = pn_delivery(link, (len(tag), _FFI.from_buffer(tag)))
    pn_link_send(link, payload, len(payload))
    pn_link_advance(link)
    if settled:
        pn_delivery_settle(delivery)


def settle_all(deliveries: list[Any], outcome: int) -> None:
    """Settle client deliveries the endpoint referenced with `outcome` (0: echo each one's own outcome, as
    the SDKs await for their settlements; a modified one's failed and undeliverable flags with it), and
    let go of them."""
    for delivery in deliveries:
        state = outcome or pn_delivery_remote_state(delivery)
        if not outcome and state == PN_MODIFIED:
            local, remote = pn_delivery_local(delivery), pn_delivery_remote(delivery)
            pn_disposition_set_failed(local, pn_disposition_is_failed(remote))
            pn_disposition_set_undeliverable(local, pn_disposition_is_undeliverable(remote))
        pn_delivery_update(delivery, state)
        pn_delivery_settle(delivery)
        pn_decref(delivery)
