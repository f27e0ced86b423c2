"""Create, update, read and delete queues, topics, subscriptions and rules; save and restore them.

A mixin of `Namespace`: it shares the namespace's maps, journal and clock.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import replace
from typing import Any

from local_broker.engine.clock import to_datetime
from local_broker.engine.entities import Queue, Subscription, Topic, Usage
from local_broker.engine.errors import (
    ArgumentError,
    EntityAlreadyExistsError,
    EntityNotFoundError,
    QuotaExceededError,
)
from local_broker.engine.filtering import CompiledRule, compile_rule, is_sql_filter
from local_broker.engine.message import MessageState
from local_broker.engine.properties import (
    DEFAULT_RULE_NAME,
    TIMESPAN_MAX,
    AvailabilityStatus,
    CorrelationFilter,
    EntityStatus,
    FalseFilter,
    NamespaceConfig,
    NamespaceProperties,
    QueueProperties,
    RuleProperties,
    RuntimeProperties,
    SqlFilter,
    SqlRuleAction,
    SubscriptionProperties,
    TopicProperties,
    TrueFilter,
    is_infinite,
)
from local_broker.engine.validation import (
    check_create_only,
    check_queue,
    check_segment_name,
    check_subscription,
    check_topic,
)
from local_broker.store import codec
from local_broker.store.base import StoredState

codec.register(
    QueueProperties,
    TopicProperties,
    SubscriptionProperties,
    RuleProperties,
    TrueFilter,
    FalseFilter,
    SqlFilter,
    CorrelationFilter,
    SqlRuleAction,
    EntityStatus,
    NamespaceConfig,
)


def _page(items: list[Any], skip: int, top: int | None) -> list[Any]:
    return items[skip:] if top is None else items[skip : skip + top]


class Management:
    """Entity and rule CRUD (see docs/engine-api.md section 3)."""

    # Provided by Namespace.
    config: NamespaceConfig
    clock: Any
    created_at: float
    _queues: dict[str, Queue]
    _topics: dict[str, Topic]
    _usage: Usage
    _addresses: dict[str, Any]
    _journal: Any
    _idle_heap: list[Any]
    _schedule_heap: list[Any]
    _lock_heap: list[Any]
    _dedup_heap: list[Any]
    _ticket: Any
    _uids: Any

    # --- helpers --------------------------------------------------------------------------------

    def _register(self, entity: Queue | Topic | Subscription) -> None:
        key = entity.key
        self._addresses[key] = entity
        if not isinstance(entity, Topic):
            self._addresses[key + "/$deadletterqueue"] = entity.dlq
            self._addresses[key + "/$transfer/$deadletterqueue"] = entity.tdlq

    def _unregister(self, entity: Queue | Topic | Subscription) -> None:
        self._reroute(entity)
        self._journal.entity_deleted(entity)  # before its messages leave: unwritten ones are forgotten
        key = entity.key
        for suffix in ("", "/$deadletterqueue", "/$transfer/$deadletterqueue"):
            self._addresses.pop(key + suffix, None)
        for sq in entity.sub_queues():
            sq.resize(-sq.size)  # a deleted subscription's bytes leave its topic's total
            for m in sq.messages.values():
                m.entity = None
            sq.messages.clear()
            sq.lazy = ()
            sq.tail = None
            sq.session_locks.clear()
        if isinstance(entity, Queue | Topic):
            entity.scheduled.clear()

    @staticmethod
    def _reroute(entity: Any) -> None:
        """A topic's fan-out plan is stale once the topic, a subscription or a rule of it changed."""
        if isinstance(entity, Subscription):
            entity.topic.routes = None
        elif isinstance(entity, Topic):
            entity.routes = None

    def _rules_changed(self, sub: Subscription) -> None:
        self._reroute(sub)
        self._journal.entity(sub)

    def _watch_idle(self, entity: Any) -> None:
        idle = entity.props.auto_delete_on_idle
        if not is_infinite(idle):
            heapq.heappush(
                self._idle_heap, (entity.accessed + idle.total_seconds(), next(self._ticket), entity)
            )

    def _last_access(self, entity: Any) -> float:
        if isinstance(entity, Topic):
            return max([entity.accessed, *(s.accessed for s in entity.subscriptions.values())])
        return entity.accessed

    def _delete_idle(self, now: float) -> None:
        heap = self._idle_heap
        while heap and heap[0][0] <= now:
            _, _, entity = heapq.heappop(heap)
            if self._addresses.get(entity.key) is not entity:
                continue
            idle = entity.props.auto_delete_on_idle
            if is_infinite(idle):
                continue
            deadline = self._last_access(entity) + idle.total_seconds()
            if deadline > now:
                heapq.heappush(heap, (deadline, next(self._ticket), entity))
            elif isinstance(entity, Queue):
                self.delete_queue(entity.props.name)
            elif isinstance(entity, Topic):
                self.delete_topic(entity.props.name)
            else:
                self.delete_subscription(entity.topic.props.name, entity.props.name)

    def _check_forwarding(self, props: Any, source_path: str, requires_session: bool) -> None:
        for attribute in ("forward_to", "forward_dead_lettered_messages_to"):
            destination = getattr(props, attribute)
            if destination is None:
                continue
            key = destination.lower()
            element = "ForwardTo" if attribute == "forward_to" else "ForwardDeadLetteredMessagesTo"
            if key not in self._queues and key not in self._topics:
                raise ArgumentError(
                    f"The auto-forwarding destination '{destination}' does not exist; create it first. "
                    f"Parameter name: {element}",
                    attribute,
                )
            if key == source_path.lower():
                raise ArgumentError(
                    f"The entity '{source_path}' cannot forward to itself. Parameter name: {element}",
                    attribute,
                )
            if attribute == "forward_to" and requires_session:
                raise ArgumentError(
                    "Auto-forwarding is not supported for entities that require sessions. "
                    "Parameter name: ForwardTo",
                    attribute,
                )
        if props.forward_to:
            props.auto_delete_on_idle = TIMESPAN_MAX

    def _check_entity_count(self) -> None:
        if len(self._queues) + len(self._topics) >= self.config.max_entities:
            raise QuotaExceededError(
                f"The maximum number of entities ({self.config.max_entities}) in namespace "
                f"'{self.config.name}' has been reached."
            )

    def _check_partitioned_count(self, props: Any) -> None:
        if not props.enable_partitioning:
            return
        count = sum(1 for t in [*self._queues.values(), *self._topics.values()] if t.partitioned)
        if count >= self.config.max_partitioned_entities:
            raise QuotaExceededError(
                f"The maximum number of partitioned entities ({self.config.max_partitioned_entities}) in "
                f"namespace '{self.config.name}' has been reached."
            )

    def set_partition_available(self, path: str, partition_id: int, available: bool) -> None:
        """Fault injection: take one partition of a partitioned queue or topic down, or bring it back."""
        target = self._addresses.get(path.strip("/").lower())
        if not isinstance(target, Queue | Topic):
            raise EntityNotFoundError.for_path(path)
        if not target.partitioned:
            raise ArgumentError(f"The entity '{target.path}' is not partitioned.", "partition_id")
        if not 0 <= partition_id < target.partition_count:
            raise ArgumentError(
                f"Partition {partition_id} does not exist; '{target.path}' has partitions 0 to "
                f"{target.partition_count - 1}.",
                "partition_id",
            )
        if available:
            target.down.discard(partition_id)
        else:
            target.down.add(partition_id)

    def _queue(self, name: str) -> Queue:
        q = self._queues.get(name.strip("/").lower())
        if q is None:
            raise EntityNotFoundError.for_path(name)
        return q

    def _topic(self, name: str) -> Topic:
        t = self._topics.get(name.strip("/").lower())
        if t is None:
            raise EntityNotFoundError.for_path(name)
        return t

    def _subscription(self, topic_name: str, name: str) -> Subscription:
        topic = self._topic(topic_name)
        sub = topic.subscriptions.get(name.lower())
        if sub is None:
            raise EntityNotFoundError.for_path(f"{topic.props.name}/Subscriptions/{name}")
        return sub

    def _stamp(self, props: Any, entity: Any) -> Any:
        """A copy of the properties for a caller, with the access time filled in."""
        return replace(props, accessed_at=to_datetime(self._last_access(entity)))

    def _now_dt(self) -> Any:
        return to_datetime(self.clock.now())

    # --- queues ---------------------------------------------------------------------------------

    def _create_send_target(
        self, props: Any, cls: type[Queue] | type[Topic], registry: dict[str, Any]
    ) -> Any:
        key = props.name.lower()
        if key in self._queues or key in self._topics:
            raise EntityAlreadyExistsError.for_path(props.name)
        self._check_entity_count()
        self._check_partitioned_count(props)
        props.created_at = props.updated_at = self._now_dt()
        target = cls(props, self.config.partition_count, self._usage)
        registry[key] = target
        return self._added(target)

    def _added(self, entity: Queue | Topic | Subscription) -> Any:
        """An entity created or its properties replaced."""
        self._reroute(entity)
        entity.accessed = self.clock.now()
        self._register(entity)
        self._page_tail(entity)  # type: ignore[attr-defined]
        self._journal.entity(entity)
        self._watch_idle(entity)
        return self._stamp(entity.props, entity)

    def _replace_props(self, entity: Queue | Topic | Subscription, props: Any) -> Any:
        """An update: the new settable values replace the old; creation time stays."""
        props.created_at = entity.props.created_at
        props.updated_at = self._now_dt()
        entity.props = props
        return self._added(entity)

    def create_queue(self, props: QueueProperties) -> QueueProperties:
        props = replace(props, authorization_rules=list(props.authorization_rules))
        check_queue(props, self.config)
        self._check_forwarding(props, props.name, props.requires_session)
        return self._create_send_target(props, Queue, self._queues)

    def update_queue(self, props: QueueProperties) -> QueueProperties:
        q = self._queue(props.name)
        props = replace(props, name=q.props.name, authorization_rules=list(props.authorization_rules))
        check_queue(props, self.config)
        check_create_only("queue", q.props, props)
        self._check_forwarding(props, q.props.name, q.props.requires_session)
        return self._replace_props(q, props)

    def get_queue(self, name: str) -> QueueProperties:
        q = self._queue(name)
        return self._stamp(q.props, q)

    def list_queues(self, skip: int = 0, top: int | None = None) -> list[QueueProperties]:
        queues = [self._queues[k] for k in sorted(self._queues)]
        return [self._stamp(q.props, q) for q in _page(queues, skip, top)]

    def delete_queue(self, name: str) -> None:
        q = self._queue(name)
        del self._queues[q.key]
        self._unregister(q)

    def get_queue_runtime_properties(self, name: str) -> RuntimeProperties:
        return self._runtime(self._queue(name))

    # --- topics ---------------------------------------------------------------------------------

    def create_topic(self, props: TopicProperties) -> TopicProperties:
        props = replace(props, authorization_rules=list(props.authorization_rules))
        check_topic(props, self.config)
        return self._create_send_target(props, Topic, self._topics)

    def update_topic(self, props: TopicProperties) -> TopicProperties:
        t = self._topic(props.name)
        props = replace(props, name=t.props.name, authorization_rules=list(props.authorization_rules))
        check_topic(props, self.config)
        check_create_only("topic", t.props, props)
        return self._replace_props(t, props)

    def get_topic(self, name: str) -> TopicProperties:
        t = self._topic(name)
        return self._stamp(t.props, t)

    def list_topics(self, skip: int = 0, top: int | None = None) -> list[TopicProperties]:
        topics = [self._topics[k] for k in sorted(self._topics)]
        return [self._stamp(t.props, t) for t in _page(topics, skip, top)]

    def delete_topic(self, name: str) -> None:
        t = self._topic(name)
        for sub in list(t.subscriptions.values()):
            self._unregister(sub)
        t.subscriptions.clear()
        del self._topics[t.key]
        self._unregister(t)

    def get_topic_runtime_properties(self, name: str) -> RuntimeProperties:
        return self._runtime(self._topic(name))

    # --- subscriptions --------------------------------------------------------------------------

    def create_subscription(
        self, topic_name: str, props: SubscriptionProperties, default_rule: RuleProperties | None = None
    ) -> SubscriptionProperties:
        topic = self._topic(topic_name)
        props = replace(props, topic_name=topic.props.name)
        check_subscription(props)
        if props.name.lower() in topic.subscriptions:
            raise EntityAlreadyExistsError.for_path(f"{topic.props.name}/Subscriptions/{props.name}")
        if len(topic.subscriptions) >= self.config.max_subscriptions_per_topic:
            raise QuotaExceededError(
                f"The maximum number of subscriptions ({self.config.max_subscriptions_per_topic}) of topic "
                f"'{topic.props.name}' has been reached."
            )
        self._check_forwarding(
            props, f"{topic.props.name}/Subscriptions/{props.name}", props.requires_session
        )
        rule = (
            replace(default_rule)
            if default_rule is not None
            else RuleProperties(DEFAULT_RULE_NAME, TrueFilter())
        )
        check_segment_name("rule", rule.name)
        compiled = compile_rule(rule)
        self._check_filter_quota(topic, [rule])
        props.created_at = props.updated_at = rule.created_at = self._now_dt()
        sub = Subscription(topic, props)
        sub.rules[rule.name.lower()] = compiled
        topic.subscriptions[props.name.lower()] = sub
        return self._added(sub)

    def update_subscription(self, topic_name: str, props: SubscriptionProperties) -> SubscriptionProperties:
        sub = self._subscription(topic_name, props.name)
        props = replace(props, name=sub.props.name, topic_name=sub.topic.props.name)
        check_subscription(props)
        check_create_only("subscription", sub.props, props)
        self._check_forwarding(props, sub.path, sub.props.requires_session)
        return self._replace_props(sub, props)

    def get_subscription(self, topic_name: str, name: str) -> SubscriptionProperties:
        sub = self._subscription(topic_name, name)
        return self._stamp(sub.props, sub)

    def list_subscriptions(
        self, topic_name: str, skip: int = 0, top: int | None = None
    ) -> list[SubscriptionProperties]:
        topic = self._topic(topic_name)
        subs = [topic.subscriptions[k] for k in sorted(topic.subscriptions)]
        return [self._stamp(s.props, s) for s in _page(subs, skip, top)]

    def delete_subscription(self, topic_name: str, name: str) -> None:
        sub = self._subscription(topic_name, name)
        del sub.topic.subscriptions[sub.props.name.lower()]
        self._unregister(sub)

    def get_subscription_runtime_properties(self, topic_name: str, name: str) -> RuntimeProperties:
        return self._runtime(self._subscription(topic_name, name))

    # --- rules ----------------------------------------------------------------------------------

    def _check_filter_quota(self, topic: Topic, new: list[RuleProperties], replacing: Any = None) -> None:
        rules = [
            r.props for s in topic.subscriptions.values() for r in s.rules.values() if r is not replacing
        ]
        rules += new
        sql = sum(1 for r in rules if is_sql_filter(r))
        if sql > self.config.max_sql_filters_per_topic:
            raise QuotaExceededError(
                f"The maximum number of SQL filters ({self.config.max_sql_filters_per_topic}) of topic "
                f"'{topic.props.name}' has been reached."
            )
        if len(rules) - sql > self.config.max_correlation_filters_per_topic:
            raise QuotaExceededError(
                "The maximum number of correlation filters "
                f"({self.config.max_correlation_filters_per_topic}) "
                f"of topic '{topic.props.name}' has been reached."
            )

    def _rule(self, sub: Subscription, name: str) -> CompiledRule:
        rule = sub.rules.get(name.lower())
        if rule is None:
            raise EntityNotFoundError.for_path(f"{sub.path}/Rules/{name}")
        return rule

    def create_rule(self, topic_name: str, subscription_name: str, rule: RuleProperties) -> RuleProperties:
        sub = self._subscription(topic_name, subscription_name)
        check_segment_name("rule", rule.name)
        if rule.name.lower() in sub.rules:
            raise EntityAlreadyExistsError.for_path(f"{sub.path}/Rules/{rule.name}")
        rule = replace(rule, created_at=self._now_dt())
        compiled = compile_rule(rule)
        self._check_filter_quota(sub.topic, [rule])
        sub.rules[rule.name.lower()] = compiled
        self._rules_changed(sub)
        return replace(rule)

    def update_rule(self, topic_name: str, subscription_name: str, rule: RuleProperties) -> RuleProperties:
        sub = self._subscription(topic_name, subscription_name)
        old = self._rule(sub, rule.name)
        rule = replace(rule, name=old.props.name, created_at=old.props.created_at)
        compiled = compile_rule(rule)
        self._check_filter_quota(sub.topic, [rule], replacing=old)
        sub.rules[rule.name.lower()] = compiled
        self._rules_changed(sub)
        return replace(rule)

    def get_rule(self, topic_name: str, subscription_name: str, name: str) -> RuleProperties:
        return replace(self._rule(self._subscription(topic_name, subscription_name), name).props)

    def list_rules(
        self, topic_name: str, subscription_name: str, skip: int = 0, top: int | None = None
    ) -> list[RuleProperties]:
        sub = self._subscription(topic_name, subscription_name)
        return [replace(r.props) for r in _page(list(sub.rules.values()), skip, top)]

    def delete_rule(self, topic_name: str, subscription_name: str, name: str) -> None:
        sub = self._subscription(topic_name, subscription_name)
        self._rule(sub, name)
        del sub.rules[name.lower()]
        self._rules_changed(sub)

    # --- runtime --------------------------------------------------------------------------------

    def _runtime(self, entity: Any) -> RuntimeProperties:
        props = entity.props
        rp = RuntimeProperties(
            name=props.name,
            created_at=props.created_at,
            updated_at=props.updated_at,
            accessed_at=to_datetime(self._last_access(entity)),
            availability_status=self._availability(entity),
        )
        if isinstance(entity, Topic):
            rp.subscription_count = len(entity.subscriptions)
            rules = [r.props for s in entity.subscriptions.values() for r in s.rules.values()]
            rp.sql_filter_count = sum(1 for r in rules if is_sql_filter(r))
            rp.correlation_filter_count = len(rules) - rp.sql_filter_count
            rp.scheduled_message_count = len(entity.scheduled)
            for sub in entity.subscriptions.values():
                self._add_counts(rp, sub, 0)
            rp.size_in_bytes += entity.held.size
            return rp
        scheduled = len(entity.scheduled) if isinstance(entity, Queue) else 0
        self._add_counts(rp, entity, scheduled)
        rp.scheduled_message_count = scheduled
        return rp

    @staticmethod
    def _add_counts(rp: RuntimeProperties, entity: Queue | Subscription, scheduled: int) -> None:
        tail = entity.main.tail
        rp.active_message_count += (
            len(entity.main.messages) + len(entity.main.lazy) + (tail.count if tail else 0) - scheduled
        )
        rp.dead_letter_message_count += len(entity.dlq.messages)
        rp.transfer_dead_letter_message_count += len(entity.tdlq.messages)
        rp.size_in_bytes += entity.main.size + entity.dlq.size + entity.tdlq.size

    def _availability(self, entity: Any) -> AvailabilityStatus:
        target = entity.topic if isinstance(entity, Subscription) else entity
        return AvailabilityStatus.LIMITED if target.down else AvailabilityStatus.AVAILABLE

    def namespace_properties(self) -> NamespaceProperties:
        created = to_datetime(self.created_at)
        return NamespaceProperties(
            name=self.config.name,
            created_at=created,
            modified_at=created,
            messaging_sku="Premium" if self.config.premium else "Standard",
        )

    # --- persistence ----------------------------------------------------------------------------

    def _config_record(self) -> dict[str, Any]:
        return {"config": codec.encode_value(self.config), "created_at": self.created_at}

    @staticmethod
    def _record_of(entity: Any) -> tuple[str, dict[str, Any]]:
        record: dict[str, Any] = {"props": codec.encode_value(entity.props), "accessed": entity.accessed}
        if isinstance(entity, Subscription):
            record["rules"] = [codec.encode_value(r.props) for r in entity.rules.values()]
        return entity.kind, record

    def _restore(self, state: StoredState, config: NamespaceConfig | None) -> None:
        """Rebuild every structure from a stored state (no validation: it was validated when written)."""
        self.config = codec.decode_value(state.config["config"])
        if config is not None:  # what the operator configures now wins over what was stored
            self.config.name = config.name
            self.config.max_size_in_megabytes = config.max_size_in_megabytes
        self.created_at = state.config["created_at"]
        order = {"topic": 0, "queue": 1, "subscription": 2}
        for _key, kind, record in sorted(state.entities, key=lambda e: order[e[1]]):
            props = codec.decode_value(record["props"])
            entity: Any
            if kind == "queue":
                entity = Queue(props, self.config.partition_count, self._usage)
                self._queues[entity.key] = entity
            elif kind == "topic":
                entity = Topic(props, self.config.partition_count, self._usage)
                self._topics[entity.key] = entity
            else:
                topic = self._topics[props.topic_name.lower()]
                entity = Subscription(topic, props)
                for rule_record in record["rules"]:
                    rule = codec.decode_value(rule_record)
                    entity.rules[rule.name.lower()] = compile_rule(rule)
                topic.subscriptions[props.name.lower()] = entity
            entity.accessed = record["accessed"]
            self._register(entity)
            self._watch_idle(entity)
        for record_key, value in state.counters.items():
            key = record_key.partition("#")[0]
            target = self._queues.get(key) or self._topics.get(key)
            if target is not None:
                target.restore_counter(record_key, value)
        self._restore_messages(state)
        for owner, message_id, at in state.dedup:
            target = self._queues.get(owner) or self._topics.get(owner)
            if target is None:
                continue
            window = target.props.duplicate_detection_history_time_window.total_seconds()
            if not target.dedup.order:
                heapq.heappush(self._dedup_heap, (at + window, next(self._ticket), target))
            target.dedup.record(message_id, at)
        for owner, session_id, blob in state.session_states:
            entity = self._addresses.get(owner)
            if entity is not None and entity.main.sessions is not None:
                entity.main.session(session_id).state = blob
                entity.main.resize(len(blob))
        self._journal.discard()

    def _restore_messages(self, state: StoredState) -> None:
        top_uid = 0
        for owner, kind, m in state.messages:
            top_uid = max(top_uid, m.uid)
            entity = self._addresses.get(owner)
            if entity is None:
                continue
            sq = next(s for s in entity.sub_queues() if s.kind == kind)
            token = m.lock_token
            if token is not None and sq.sessions is not None:
                m.lock_token = m.locked_until = token = None  # session locks do not survive a restart
            if m.state is MessageState.SCHEDULED:
                entity.scheduled[m.sequence_number] = m
                when = m.scheduled_enqueue_time if m.scheduled_enqueue_time is not None else 0.0
                heapq.heappush(self._schedule_heap, (when, next(self._ticket), entity, m))
            self._place(sq, m)  # type: ignore[attr-defined]
            if token is not None:
                sq.locked[token.int] = m
                heapq.heappush(self._lock_heap, (m.locked_until, next(self._ticket), [m]))
        self._uids = itertools.count(max(top_uid, state.top_uid) + 1)
        for entity in list(self._addresses.values()):
            if isinstance(entity, Queue | Subscription):
                self._page_tail(entity)  # type: ignore[attr-defined]
        for owner, (count, size) in state.tails.items():  # plain messages the store left on disk
            entity = self._addresses.get(owner)
            if not isinstance(entity, Queue | Subscription):
                continue
            sq = entity.main
            if sq.tail is not None:
                sq.tail.count, sq.tail.size = count, size
                sq.resize(size)
            else:  # sessions or partitions: this sub-queue keeps everything in memory
                for m in self._store.page(owner, int(sq.kind), 0, None):  # type: ignore[attr-defined]
                    self._place(sq, m)  # type: ignore[attr-defined]
