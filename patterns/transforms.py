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


# Stock edits for the validation / reduction / enrichment recipe (`recipes.editing`).

PRIVATE_PREFIX = "private-"
ORIGIN_PROPERTY = "origin-namespace"


def validate_json(replica: Replica) -> Replica | None:
    """Validation: a message whose body is not a JSON document is not copied."""
    try:
        json.loads(replica.body.as_bytes())
    except ValueError:
        return None
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
