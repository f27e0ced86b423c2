"""The fault state object the AMQP listener and the management endpoint consult."""

import pytest

from local_broker.faults import FaultState, NamespaceFaults


def test_changes_notify_listeners_with_old_and_new_state():
    faults = NamespaceFaults()
    seen: list[tuple[FaultState, FaultState]] = []
    unregister = faults.on_change(lambda old, new: seen.append((old, new)))
    faults.set({"namespace_down": "drop"})
    faults.set({"namespace_down": "drop"})  # no change, no call
    faults.set({"latency_ms": 40})
    assert [(old.namespace_down, new.namespace_down, new.latency_ms) for old, new in seen] == [
        (None, "drop", 0), ("drop", "drop", 40)]
    state = faults.state
    assert state.refuses_connections and state.drops_connections and state.latency_seconds == 0.04
    unregister()
    faults.set({"namespace_down": "refuse"})
    assert len(seen) == 2
    assert faults.state.refuses_connections and not faults.state.drops_connections


def test_partitions_are_recorded():
    faults = NamespaceFaults()
    faults.record_partition("orders", 3, available=False)
    faults.record_partition("orders", 5, available=False)
    faults.record_partition("orders", 3, available=True)
    assert faults.state.to_json()["partitions_down"] == [{"entity": "orders", "partition_id": 5}]


@pytest.mark.parametrize("changes", [{"namespace_down": "down"}, {"latency_ms": -5}, {"latency_ms": 1.5},
                                     {"latency_ms": True}, {"latency_ms": 10**9}, {"region": "x"}])
def test_invalid_settings_change_nothing(changes):
    faults = NamespaceFaults()
    with pytest.raises(ValueError):
        faults.set(changes)
    assert faults.state == FaultState()
