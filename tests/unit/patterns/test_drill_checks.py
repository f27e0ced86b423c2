"""The drills' arrival check (audit taps): each message enqueued once where it must be, nowhere else."""

from patterns.drills.metrics import check_arrivals


def enqueued(namespace, message_id, sequence_number, repl_source=None):
    record = {"event": "enqueued", "namespace": namespace, "message_id": message_id,
              "sequence_number": sequence_number}
    return record | ({"repl_source": repl_source} if repl_source else {})


def test_arrivals_are_checked_per_namespace_and_an_audit_redelivery_is_not_a_second_enqueue():
    routes = {"m1": {"src", "eu"}, "m2": {"src", "us"}, "m3": {"src", "eu", "us"}}
    by_event = {
        "sent": [{"event": "sent", "namespace": "src", "message_id": m} for m in routes],
        "enqueued": [
            *(enqueued("src", m, n) for n, m in enumerate(routes)),
            enqueued("eu", "m1", 7, "src/events"), enqueued("eu", "m1", 7, "src/events"),  # tap saw it again
            enqueued("eu", "m3", 8, "src/events"), enqueued("us", "m3", 4, "src/events"),
            enqueued("us", "m2", 5, "src/events"),
        ],
    }
    details: dict = {}
    assert check_arrivals(by_event, ["src", "eu", "us"], routes.__getitem__, details) == []
    assert (details["enqueued_in_eu"], details["audit_redeliveries_in_eu"], details["bounced"]) == (2, 1, 0)

    by_event["enqueued"] += [
        enqueued("us", "m1", 6, "src/events"),  # routed where its filter does not say
        enqueued("us", "m2", 9, "src/events"),  # a second enqueue: duplicate detection let it through
        enqueued("src", "m3", 12, "src/events;us/events"),  # came back: two hops
    ]
    by_event["enqueued"].remove(enqueued("eu", "m3", 8, "src/events"))
    problems = check_arrivals(by_event, ["src", "eu", "us"], routes.__getitem__, details)
    assert problems == [
        "1 message(s) reached src more than once: ['m3']",
        "1 message(s) never reached eu: ['m3']",
        "1 message(s) reached us more than once: ['m2']",
        "1 message(s) reached us, where they do not belong: ['m1']",
        "1 message(s) bounced back: ['m3']",
    ]
