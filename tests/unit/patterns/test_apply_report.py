"""How `topology apply` prints a plan: one line per change, one summary per namespace."""

import datetime as dt

from patterns.apply import describe, summary
from patterns.diff import Change, Difference
from topology import RuleSpec


def test_each_kind_of_change_reads_as_one_line():
    rule = RuleSpec("replication", {"sql": "replication IS NULL"}, {"sql": "SET replication = 1"})
    lines = [describe(c) for c in (
        Change("create", "queue", ("orders",),
               {"lock_duration": dt.timedelta(seconds=30), "max_delivery_count": 5}),
        Change("create", "rule", ("events", "to-b", "replication"), rule=rule),
        Change("create", "rule", ("events", "vip", "vip"),
               rule=RuleSpec("vip", {"correlation": {"label": "vip", "properties": {"tier": 1}}})),
        Change("create", "rule", ("events", "big", "big"),
               rule=RuleSpec("big", {"sql": "amount > @min", "parameters": {"@min": 10}})),
        Change("update", "subscription", ("events", "consumer"),
               differences=(Difference("lock_duration", dt.timedelta(minutes=1), dt.timedelta(seconds=45)),)),
        Change("delete", "rule", ("events", "to-b", "$Default")),
        Change("extra", "queue", ("legacy",)),
        Change("conflict", "queue", ("jobs",), differences=(Difference("requires_session", False, True),)),
    )]
    assert lines == [
        "+ queue orders (lock_duration=PT30S, max_delivery_count=5)",
        "+ rule events/to-b/replication (filter sql replication IS NULL; action: SET replication = 1)",
        "+ rule events/vip/vip (filter correlation label='vip', tier=1)",
        "+ rule events/big/big (filter sql amount > @min with {'@min': 10})",
        "~ subscription events/consumer: lock_duration: PT1M -> PT45S",
        "- rule events/to-b/$Default",
        "? queue legacy: not in the topology; kept (--delete-extra removes it)",
        "! queue jobs: requires_session: False -> True cannot change on an existing queue; "
        "delete it (its messages are lost) and apply again",
    ]


def test_the_summary_counts_by_kind():
    changes = [Change("create", "topic", ("t",)), Change("create", "queue", ("q",)),
               Change("delete", "rule", ("t", "s", "$Default")), Change("extra", "queue", ("x",))]
    assert summary(changes) == "2 to create, 1 to delete, 1 not in the topology (kept)"
    assert summary([]) == "up to date"
