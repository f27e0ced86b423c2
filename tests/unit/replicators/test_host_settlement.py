"""How the local host groups a batch for ranged completion (replicators/host/settlement.py): runs of
consecutive delivery ids in the batch's order; a gap, a step back or a message without a delivery id (a
transport that has none) starts a new run."""

from __future__ import annotations

from types import SimpleNamespace

from replicators.host.settlement import delivery_runs


def ids(*delivery_ids):
    return [SimpleNamespace(_delivery_id=d) for d in delivery_ids]


def runs_of(messages):
    return [[m._delivery_id for m in run] for run in delivery_runs(messages)]


def test_consecutive_delivery_ids_are_one_run():
    assert runs_of(ids(7, 8, 9, 10)) == [[7, 8, 9, 10]]


def test_gaps_and_steps_back_split_runs():
    assert runs_of(ids(1, 2, 4, 5, 3, 9)) == [[1, 2], [4, 5], [3], [9]]


def test_messages_without_delivery_ids_are_runs_of_their_own():
    assert runs_of(ids(None, None, 1, 2, None, 3)) == [[None], [None], [1, 2], [None], [3]]


def test_an_empty_batch_has_no_runs():
    assert delivery_runs([]) == []
