"""Transforms that patterns name in their tasks (`options.transform`); each takes the replica a task is about
to send and returns it (changed or rerouted) or None to drop it."""

from __future__ import annotations

import json

from replicators.message import Replica
from replicators.stamps import HOP_SEPARATOR, REPL_SOURCE, read_stamp

SPILLED_MARKER = "spilled"
AUX_SUFFIX = "-aux"


def spill_once(replica: Replica) -> Replica:
    """Spillover loop prevention. A dead-lettered message spills to the paired namespace once, marked; if the
    copy dead-letters there too, it arrives here marked and goes to `<queue>-aux` (the composite dead-letter
    queue of its origin namespace) instead of bouncing back into the queue it already failed in.

    The marker is set here rather than by `options.marker`, because the task stamps its marker before the
    transform runs, and the transform must see whether the source already carried it."""
    if replica.application_properties.get(SPILLED_MARKER) is not None:
        replica.entity = f"{replica.entity}{AUX_SUFFIX}"
        replica.time_to_live = None  # a dead-letter queue keeps what it holds
    else:
        replica.application_properties[SPILLED_MARKER] = 1
    return replica


# Validators never drop what they reject: the copy goes to the target's quarantine queue with the reason.

QUARANTINE_SUFFIX = "-quarantine"
QUARANTINE_REASON = "quarantine-reason"
REASON_LIMIT = 512  # characters of a reason kept in the property


def quarantine(replica: Replica, reason: str) -> Replica:
    """A copy a validator rejected is rerouted to `<entity>-quarantine` in the target namespace (a queue the
    editing and consolidation recipes declare), unchanged but for `quarantine-reason`, so nothing a
    validator rejects is lost and an operator can see why."""
    replica.application_properties[QUARANTINE_REASON] = reason[:REASON_LIMIT]
    replica.entity = f"{replica.entity}{QUARANTINE_SUFFIX}"
    return replica


# Stock edits for the validation / reduction / enrichment recipe (`recipes.editing`).

PRIVATE_PREFIX = "private-"
ORIGIN_PROPERTY = "origin-namespace"


def validate_json(replica: Replica) -> Replica:
    """Validation: a message whose body is not a JSON document is quarantined."""
    try:
        json.loads(replica.body.as_bytes())
    except ValueError as error:
        return quarantine(replica, f"the body is not a JSON document: {error}")
    return replica


def drop_private_properties(replica: Replica) -> Replica:
    """Reduction: application properties named `private-*` stay in the source namespace."""
    replica.application_properties = {
        name: value for name, value in replica.application_properties.items()
        if not name.lower().startswith(PRIVATE_PREFIX)
    }
    return replica


def add_origin(replica: Replica) -> Replica:
    """Enrichment: `origin-namespace` names the namespace the message was first published to (the first hop
    of its `repl-source` stamp), so consumers need not parse the stamps."""
    hops = read_stamp(replica.application_properties, REPL_SOURCE)
    if hops:
        replica.application_properties[ORIGIN_PROPERTY] = hops.split(HOP_SEPARATOR, 1)[0].split("/", 1)[0]
    return replica


def validate_reduce_enrich(replica: Replica) -> Replica:
    """The three edits in one task: private properties never leave the source (not even in quarantine),
    a body that is not JSON is quarantined, and every copy names its origin namespace."""
    return add_origin(validate_json(drop_private_properties(replica)))
