"""Transforms that patterns name in their tasks (`options.transform`); each takes the replica a task is about
to send and returns it (changed or rerouted) or None to drop it."""

from __future__ import annotations

from replicators.message import Replica

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
