"""A topic's fan-out: its plan (which subscriptions get a copy, compiled into one selector), publishing a
message into its subscriptions, and lazy copies (a plain subscription's copy is the topic message itself
until it is received, expires or the plan changes; see SubQueue).

A mixin of `Namespace` (namespace.py): it shares the namespace's maps, heaps, journal and clock.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from local_broker.engine.entities import (
    WINDOW,
    SubQueue,
    Topic,
)
from local_broker.engine.filtering import CompiledRule, Route, Target, selector, still_lazy
from local_broker.engine.message import (
    Message,
)
from local_broker.engine.placement import INF, UNREACHABLE
from local_broker.engine.properties import EntityStatus
from local_broker.rules.errors import FilterEvaluationError


def _copy_record(sq: SubQueue, m: Message) -> Message:
    """The record of the lazy copy `m` of `sq`, not yet placed."""
    copy = m.copy()
    copy.uid = m.uid + sq.entity.ordinal
    copy.expires_at = m.expiry(sq.lazy_ttl)
    copy.entity = sq
    copy.persisted = m.persisted  # its row is written with the message's lazy copies, or with it
    return copy


class Fanout:
    """Topic messages into subscriptions."""

    def _routes(self, topic: Topic) -> Callable[[Message], list[Target]]:
        """The topic's fan-out plan, built again only after its subscriptions, rules or properties changed
        (Management sets `topic.routes` to None): subscriptions that can get a copy, in order, with
        what deciding that takes, compiled into one selector.

        A subscription gets lazy copies (see SubQueue) unless it forwards, has sessions or a rule with an
        action, or the topic is partitioned (its sequence numbers do not rise across partitions). One
        whose lazy copies no longer fit (it stopped getting them, or its time to live changed) gives them
        records first: they keep the TTL they were placed with, and stay ahead of what arrives next."""
        routes = topic.routes
        if routes is None:
            cap = topic.props.default_message_time_to_live.total_seconds()
            filtering_errors_kept = not topic.props.filtering_messages_before_publishing
            plan = []
            shortest: float | None = None
            for sub in topic.subscriptions.values():
                props, main = sub.props, sub.main
                ttl = min(props.default_message_time_to_live.total_seconds(), cap)
                lazy = not (
                    topic.partitioned
                    or props.forward_to
                    or props.requires_session
                    or any(rule.apply is not None for rule in sub.rules.values())
                )
                if main.lazy and not (lazy and main.lazy_ttl == ttl):
                    self._materialize(main, INF)
                main.lazy_ttl = ttl
                rules = tuple(rule for rule in sub.rules.values() if not rule.never)
                if props.status is EntityStatus.DISABLED or not rules:
                    continue  # gets no copies whatever the message
                if lazy and (shortest is None or ttl < shortest):
                    shortest = ttl
                plan.append(
                    Route(
                        sub,
                        rules,
                        props.dead_lettering_on_filter_evaluation_exceptions and filtering_errors_kept,
                        ttl,
                        main if lazy else None,
                    )
                )
            topic.lazy_ttl = shortest
            routes = topic.routes = selector(topic, plan)
        return routes

    def _publish(self, topic: Topic, m: Message, now: float) -> None:
        """Fan a topic message out into its subscriptions (semantics 4.6, 4.7).

        A plain copy (see `_routes`) is the message itself appended to the subscription's lazy copies;
        the copy's uid is the message's (a block of `topic.span` reserved here) plus the subscription's
        ordinal. Other copies get records of their own now."""
        topic.enqueued += 1
        targets = (topic.routes or self._routes(topic))(m)
        if not targets:
            self._journal.delete(m)  # an activated or forwarded message may have a stored row
            return
        last = targets[-1]
        lazy_ttl = topic.lazy_ttl
        if lazy_ttl is not None:  # the message may stand for lazy copies: never one of the other copies
            last = None
            self._journal.delete(m)  # the row of an activated or forwarded message: its copies have their own
            m.persisted = False
        size = m.size
        available = self._available
        placed = 0
        for target in targets:
            route, what = target
            sub = route.subscription
            sub.accessed = now
            if what is None:
                main = route.main
                if main is not None:
                    main.lazy.append(m)
                    if len(main.lazy) > WINDOW and main.tail is not None:
                        self._spilling[main] = None  # written at the commit, then left in the store
                    main.size += size
                    available[main] = None
                    sub.enqueued += 1
                    placed += 1
                    continue
                self._enqueue(sub, m if target is last else m.copy(), now, route.ttl)
                continue
            copy = m if target is last else m.copy()
            if isinstance(what, CompiledRule):
                copy.with_application_properties({"RuleName": what.props.name})  # the action's own dict
                try:
                    what.apply(copy)  # type: ignore[misc]
                except FilterEvaluationError as exc:
                    what = exc
                else:
                    self._enqueue(sub, copy, now, route.ttl)
                    continue
            if sub.props.dead_lettering_on_filter_evaluation_exceptions:
                self._to_dead_letter(sub, copy, what.type_name, what.description, now)
        if placed:
            topic.size += size * placed
            topic.usage.size += size * placed
            m.uid = base = next(self._uids)
            self._uids = itertools.count(base + topic.span)
            self._journal.publish(m, targets)
            expires = m.expiry(lazy_ttl)  # type: ignore[arg-type]
            if expires < UNREACHABLE:
                heapq.heappush(self._lazy_heap, (expires, next(self._ticket), m, targets))

    def _own_copy(self, sq: SubQueue, m: Message) -> Message:
        """The record of the lazy copy `m` just taken off the front of `sq.lazy`, in `sq` (not yet ready,
        locked, or watched for expiry: its caller decides)."""
        copy = _copy_record(sq, m)
        sq.messages[copy.uid] = copy
        sq.browse.add(copy)
        return copy

    def _materialize(self, sq: SubQueue, until: float) -> None:
        """Give the lazy copies of `sq` numbered up to `until` records of their own, in order, ready (or,
        while older messages of `sq` wait in the store, in its tail after them: paging.py)."""
        lazy, journal, tail = sq.lazy, self._journal, sq.tail
        while lazy and lazy[0].sequence_number <= until:
            if tail is not None and tail.count:
                m = _copy_record(sq, lazy.popleft())
                if m.persisted:  # its row is written: one more for the tail to read
                    tail.count += 1
                    tail.size += m.size
                    continue
                self._to_tail(sq, m)
            else:
                m = self._own_copy(sq, lazy.popleft())
                sq.ready.fresh.append(m)
                if m.expires_at < UNREACHABLE:
                    self._watch_expiry(m)
            if not m.persisted:
                journal.put(m)  # no longer lazy: the journal's lazy rows leave it out

    def _expire_lazy(self, m: Message, targets: list[Target], now: float) -> None:
        """The earliest lazy copy of topic message `m` was due: the copies due get records (the TTL heap
        then expires them), the heap holds `m` again for the next one."""
        later = INF
        for route in still_lazy(m, targets):
            expires = m.expiry(route.ttl)
            if expires <= now:
                self._materialize(route.main, m.sequence_number)
            elif expires < later:
                later = expires
        if later < UNREACHABLE:
            heapq.heappush(self._lazy_heap, (later, next(self._ticket), m, targets))
