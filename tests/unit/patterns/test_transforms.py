"""The transforms patterns name in their tasks, run on replicas made by the replicators' own copy."""

import datetime as dt

from patterns.transforms import add_origin, drop_private_properties, spill_once, validate_json
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


def test_validate_json_drops_what_is_not_json():
    assert validate_json(replica(b'{"order": 7}')) is not None
    assert validate_json(replica(b"<order>7</order>")) is None
    assert validate_json(replica(b"\xff\xfe")) is None


def test_drop_private_properties_trims_the_copy():
    trimmed = drop_private_properties(replica(order=7, **{"private-note": "x", "Private-Token": "y"}))
    assert "order" in trimmed.application_properties
    assert not [k for k in trimmed.application_properties if k.lower().startswith("private-")]


def test_add_origin_names_the_first_namespace_on_the_path():
    first_hop = add_origin(replica(entity="events"))
    assert first_hop.application_properties["origin-namespace"] == "west"
    second_hop = add_origin(replica(entity="events", **{"repl-source": "east/events"}))
    assert second_hop.application_properties["origin-namespace"] == "east"
