"""Transforms the replication integration tests name by dotted path in their topology."""

from __future__ import annotations

import time

from replicators.message import Replica


class PoisonMessage(ValueError):
    pass


def reject_poison(replica: Replica) -> Replica | None:
    """Validation: a message marked `poison` cannot be replicated; one marked `drop` is filtered out; one
    marked `quarantine` is rerouted to the target's `quarantine` queue; the rest are enriched."""
    if replica.application_properties.get("poison"):
        raise PoisonMessage(f"order {replica.message_id} has no customer")
    if replica.application_properties.get("drop"):
        return None
    if replica.application_properties.get("quarantine"):
        replica.entity = "quarantine"
    replica.application_properties["validated"] = True
    return replica


_slow_once = {"done": False}


def slow_first_message(replica: Replica) -> Replica:
    """Holds the first batch far beyond the source's lock duration, so only lock renewal saves it."""
    if not _slow_once["done"]:
        _slow_once["done"] = True
        time.sleep(8)
    return replica
