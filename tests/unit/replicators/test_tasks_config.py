"""The topology's `tasks`, `connections` and `audit` sections as replication tasks."""

from __future__ import annotations

import datetime as dt

import pytest

from replicators.tasks import TaskConfigError, deployment_from_dict, load_callable, load_deployment
from topology import TopologyError
from topology.durations import parse_duration, parse_timespan

TOPOLOGY = {
    "namespaces": {
        "primary": {
            "queues": {"orders": {"requires_session": True, "max_delivery_count": 3}},
            "topics": {
                "events": {
                    "enable_partitioning": True,
                    "subscriptions": {"to-secondary": {"max_delivery_count": 5}, "audit": {}},
                }
            },
        },
        "secondary": {"topics": {"events": {"enable_partitioning": True}}, "queues": {"orders": {}}},
    },
    "connections": {"PRIMARY": "primary", "SECONDARY": "secondary"},
    "tasks": [
        {
            "name": "events-primary-to-secondary",
            "source": {"connection": "PRIMARY", "topic": "events", "subscription": "to-secondary"},
            "target": {"connection": "SECONDARY", "topic": "events"},
            "options": {"ttl": "PT2M", "marker": "replication", "batch_size": 50, "concurrency": 2},
        },
        {
            "name": "orders-spillover",
            "source": {"connection": "PRIMARY", "queue": "orders", "dead_letter": True},
            "target": {"connection": "SECONDARY", "queue": "orders"},
        },
        {
            "name": "audit-primary",
            "kind": "audit",
            "source": {"connection": "PRIMARY", "topic": "events", "subscription": "audit"},
        },
    ],
    "audit": {"sink": "./audit"},
}


def test_tasks_are_read_with_entity_facts_and_options():
    deployment = deployment_from_dict(TOPOLOGY)
    replicate = deployment.task("events-primary-to-secondary")
    assert replicate.kind == "replicate"
    assert (replicate.source.namespace, replicate.source.entity) == ("primary", "events")
    assert replicate.source.facts.max_delivery_count == 5
    assert replicate.target.facts.enable_partitioning is True
    assert replicate.options.copy.ttl == dt.timedelta(minutes=2)
    assert replicate.options.copy.marker == "replication"
    assert (replicate.options.batch_size, replicate.options.concurrency) == (50, 2)
    spill = deployment.task("orders-spillover")
    assert spill.source.dead_letter and spill.source.facts.requires_session
    assert spill.source.facts.max_delivery_count == 3
    audit = deployment.task("audit-primary")
    assert audit.target is None and deployment.audit_sink == "./audit"
    assert (audit.source.topic, audit.source.subscription) == ("events", "audit")


def test_unknown_connection_keeps_the_setting_name_as_namespace():
    raw = {
        "tasks": [
            {
                "name": "t",
                "source": {"connection": "LEFT", "queue": "q"},
                "target": {"connection": "RIGHT", "queue": "q"},
            }
        ]
    }
    task = deployment_from_dict(raw).task("t")
    assert (task.source.namespace, task.target.namespace) == ("LEFT", "RIGHT")
    assert task.source.facts.max_delivery_count == 10


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ({"name": "t", "source": {"connection": "P", "queue": "q"}}, "target: expected a mapping"),
        (
            {
                "name": "t",
                "source": {"connection": "P", "topic": "t"},
                "target": {"connection": "S", "queue": "q"},
            },
            "needs a `subscription`",
        ),
        (
            {
                "name": "t",
                "source": {"connection": "P", "queue": "q", "topic": "x"},
                "target": {"connection": "S", "queue": "q"},
            },
            "exactly one of",
        ),
        ({"name": "t", "kind": "mirror", "source": {"connection": "P", "queue": "q"}}, "kind must be one of"),
        ({"name": "1bad", "source": {"connection": "P", "queue": "q"}}, "Functions name"),
        (
            {
                "name": "t",
                "source": {"connection": "P", "queue": "q"},
                "target": {"connection": "S", "queue": "q"},
                "options": {"ttl": "2 minutes"},
            },
            "ISO 8601",
        ),
        (
            {
                "name": "t",
                "source": {"connection": "P", "queue": "q"},
                "target": {"connection": "S", "queue": "q"},
                "options": {"batchsize": 3},
            },
            "options.batchsize: unknown option, did you mean batch_size?",
        ),
        (
            {
                "name": "t",
                "source": {"connection": "P", "queue": "q"},
                "target": {"connection": "S", "queue": "q"},
                "options": {"batch_size": 0},
            },
            "at least 1",
        ),
        (
            {
                "name": "t",
                "source": {"connection": "P", "queue": "q"},
                "target": {"connection": "S", "topic": "t", "subscription": "s"},
            },
            "a target is a queue or topic",
        ),
        ({"name": "t", "kind": "audit", "source": {"connection": "P", "queue": "q"}}, "audit tasks need"),
    ],
)
def test_bad_tasks_are_refused_with_the_field_named(task, message):
    with pytest.raises(TaskConfigError, match=message):
        deployment_from_dict({"tasks": [task]})


def test_duplicate_task_names_are_refused():
    task = {
        "name": "t",
        "source": {"connection": "P", "queue": "q"},
        "target": {"connection": "S", "queue": "q"},
    }
    with pytest.raises(TaskConfigError, match="unique: t"):
        deployment_from_dict({"tasks": [task, task]})


def test_yaml_and_json_files_load(tmp_path):
    import json

    import yaml

    (tmp_path / "t.yaml").write_text(yaml.safe_dump(TOPOLOGY))
    (tmp_path / "t.json").write_text(json.dumps(TOPOLOGY))
    assert load_deployment(tmp_path / "t.yaml") == load_deployment(tmp_path / "t.json")
    with pytest.raises(TopologyError, match=r"missing\.yaml: cannot read"):
        load_deployment(tmp_path / "missing.yaml")


def test_transform_paths_load_with_colon_or_dot():
    assert load_callable("json:dumps", where="x") is load_callable("json.dumps", where="x")
    assert load_callable(None, where="x") is None
    with pytest.raises(TaskConfigError, match="cannot load"):
        load_callable("json:nope", where="x")
    with pytest.raises(TaskConfigError, match="not callable"):
        load_callable("json:__doc__", where="x")


def test_durations():
    assert parse_duration("PT2M") == dt.timedelta(minutes=2)
    assert parse_duration("P1DT1H0.5S") == dt.timedelta(days=1, hours=1, seconds=0.5)
    assert parse_timespan("00:05:00") == dt.timedelta(minutes=5)
    assert parse_timespan("1.02:00:00.80") == dt.timedelta(days=1, hours=2, seconds=0.8)
    for bad in ("P", "PT", "2M", "P1DT"):
        with pytest.raises(ValueError, match="ISO 8601"):
            parse_duration(bad)
    with pytest.raises(ValueError, match="TimeSpan"):
        parse_timespan("5 minutes")
