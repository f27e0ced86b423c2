"""The transforms patterns name in their tasks, run on replicas made by the replicators' own copy."""

import datetime as dt

from patterns.transforms import (
    add_origin,
    drop_private_properties,
    spill_once,
    validate_json,
    validate_reduce_enrich,
)
from replicators.copy import copy_message
from replicators.message import AmqpBody, SourceMessage

T0 = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def replica(body=b'{"order": 7}', entity="jobs", **properties):
    source = SourceMessage(body=AmqpBody.data(body), message_id="m1", time_to_live=dt.timedelta(minutes=2),
                           application_properties=properties, namespace="west", entity=entity,
                           enqueued_time_utc=T0, sequence_number=4)
    return copy_message(source, target_entity=entity)


def test_spill_once_marks_a_first_spill_and_reroutes_a_second_to_the_auxiliary_queue():
    first = spill_once(replica(order=7))
    assert (first.entity, first.application_properties["spilled"], first.application_properties["order"]) == (
        "jobs", 1, 7)
    second = spill_once(replica(order=7, spilled=1))
    assert (second.entity, second.time_to_live) == ("jobs-aux", None)


def test_validate_json_quarantines_what_is_not_json_with_the_reason():
    valid = validate_json(replica(b'{"order": 7}'))
    assert valid.entity == "jobs" and "quarantine-reason" not in valid.application_properties
    for body in (b"<order>7</order>", b"\xff\xfe"):
        rejected = validate_json(replica(body))
        assert rejected.entity == "jobs-quarantine"
        reason = rejected.application_properties["quarantine-reason"]
        assert reason.startswith("the body is not a JSON document")
        assert rejected.body.as_bytes() == body  # kept as it was, for whoever looks into the quarantine


def test_drop_private_properties_trims_the_copy():
    trimmed = drop_private_properties(replica(order=7, **{"private-note": "x", "Private-Token": "y"}))
    assert "order" in trimmed.application_properties
    assert not [k for k in trimmed.application_properties if k.lower().startswith("private-")]


def test_add_origin_names_the_first_namespace_on_the_path():
    first_hop = add_origin(replica(entity="events"))
    assert first_hop.application_properties["origin-namespace"] == "west"
    second_hop = add_origin(replica(entity="events", **{"repl-source": "east/events"}))
    assert second_hop.application_properties["origin-namespace"] == "east"


def test_validate_reduce_enrich_trims_every_copy_names_its_origin_and_quarantines_bad_bodies():
    private = {"private-operator": "ann", "unit": "C"}
    clean = validate_reduce_enrich(replica(b'{"t": 21.5}', entity="readings", **private))
    assert (clean.entity, clean.application_properties["unit"]) == ("readings", "C")
    assert clean.application_properties["origin-namespace"] == "west"
    assert "private-operator" not in clean.application_properties
    rejected = validate_reduce_enrich(replica(b"sensor-3,21.5", entity="readings", **private))
    assert rejected.entity == "readings-quarantine"
    assert "private-operator" not in rejected.application_properties  # not even in quarantine
