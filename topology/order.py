"""What holds across entities: unique names, forwarding destinations that are declared, no forwarding
cycles, and the order to create entities in (a file has no order; Service Bus needs a forwarding
destination to exist before the entity that forwards to it)."""

from __future__ import annotations

from dataclasses import dataclass

from topology import streams
from topology.emulator import pascal
from topology.model import NamespaceSpec, TopicSpec, Topology
from topology.problems import Problems, did_you_mean
from topology.schema import FORWARDING


@dataclass(frozen=True)
class Creation:
    """One entity to create: a topic, a queue, or a subscription (`topic` set)."""

    kind: str  # queue | topic | subscription
    spec: object  # QueueSpec | TopicSpec | SubscriptionSpec
    topic: TopicSpec | None = None

    @property
    def path(self) -> str:
        name = getattr(self.spec, "name", "")
        return f"{self.topic.name}/{name}" if self.topic is not None else name


def check(topology: Topology, problems: Problems) -> None:
    spell = _spelling(topology)
    for ns in topology.namespaces.values():
        _unique_names(ns, problems, "Name" if topology.emulator else "name")
        _forwarding(ns, problems, spell)
    streams.check_names(topology, problems)
    for index, task in enumerate(topology.tasks):
        for side in ("source", "target"):
            _task_entities(topology, task, index, side, problems)


def creation_order(ns: NamespaceSpec) -> list[Creation]:
    """Topics first (nothing they need), then queues and subscriptions, each after its forwarding
    destinations. Assumes `check` found no cycle."""
    queues = {q.name.lower(): Creation("queue", q) for q in ns.queues}
    ordered = [Creation("topic", t) for t in ns.topics]
    done: set[str] = set()

    def visit(key: str) -> None:
        if key in done:
            return
        done.add(key)
        for target in _targets(queues[key].spec.properties):  # type: ignore[attr-defined]
            if target.lower() in queues:
                visit(target.lower())
        ordered.append(queues[key])

    for key in queues:
        visit(key)
    ordered += [Creation("subscription", s, t) for t in ns.topics for s in t.subscriptions]
    return ordered


def _targets(properties: dict[str, object]) -> list[str]:
    return [v for k in FORWARDING if isinstance(v := properties.get(k), str) and v]


def _spelling(topology: Topology):  # -> Callable[[str], str]
    if not topology.emulator:
        return lambda name: name
    return pascal


def _unique_names(ns: NamespaceSpec, problems: Problems, name: str) -> None:
    seen: dict[str, str] = {}
    for entity in [*ns.queues, *ns.topics]:
        first = seen.setdefault(entity.name.lower(), entity.name)
        if first is not entity.name:
            problems.add(f"{ns.name}/{entity.name}", name, f"duplicate of {first}, allowed: each queue and "
                         "topic name once in a namespace (case does not count)")
    for topic in ns.topics:
        _unique(topic.subscriptions, f"{ns.name}/{topic.name}", problems, name)
        for sub in topic.subscriptions:
            _unique(sub.rules, f"{ns.name}/{topic.name}/{sub.name}", problems, name)


def _unique(items: list, where: str, problems: Problems, name: str) -> None:
    seen: dict[str, str] = {}
    for item in items:
        first = seen.setdefault(item.name.lower(), item.name)
        if first is not item.name:
            problems.add(f"{where}/{item.name}", name, f"duplicate of {first}, allowed: each name once "
                         "(case does not count)")


def _forwarding(ns: NamespaceSpec, problems: Problems, spell) -> None:
    names = [e.name for e in [*ns.queues, *ns.topics]]
    declared = {name.lower() for name in names}
    sources: list[tuple[str, dict[str, object]]] = [(q.name, q.properties) for q in ns.queues]
    sources += [(f"{t.name}/{s.name}", s.properties) for t in ns.topics for s in t.subscriptions]
    for path, props in sources:
        for key in FORWARDING:
            target = props.get(key)
            if isinstance(target, str) and target and target.lower() not in declared:
                problems.add(f"{ns.name}/{path}", spell(key), f"'{target}' is not declared in namespace "
                             f"{ns.name}, " + did_you_mean(target, names, "allowed: a queue or topic of the "
                                                                          "same namespace"))
    _cycles(ns, problems, spell)


def _task_entities(topology: Topology, task: dict, index: int, side: str, problems: Problems) -> None:
    """A task's source or target names entities of the namespace its connection setting points at (a
    setting the file does not map is resolved by the Functions app; nothing to check here)."""
    end = task.get(side)
    if not isinstance(end, dict):
        return
    where = f"tasks/{task.get('name', index)}/{side}"
    if side == "source" and streams.check_source(topology, end, where, problems):
        return
    ns = topology.namespaces.get(topology.connections.get(str(end.get("connection")), ""))
    if ns is None:
        return
    queue, topic, subscription = end.get("queue"), end.get("topic"), end.get("subscription")
    if isinstance(queue, str) and ns.queue(queue) is None:
        problems.add(where, "queue", _undeclared("queue", queue, ns, [q.name for q in ns.queues]))
    if not isinstance(topic, str):
        return
    declared = ns.topic(topic)
    if declared is None:
        problems.add(where, "topic", _undeclared("topic", topic, ns, [t.name for t in ns.topics]))
    elif side == "source" and isinstance(subscription, str) and not any(s.name.lower() == subscription.lower()
                                                   for s in declared.subscriptions):
        problems.add(where, "subscription", _undeclared(f"subscription of {declared.name}", subscription, ns,
                                                        [s.name for s in declared.subscriptions]))


def _undeclared(kind: str, name: str, ns: NamespaceSpec, names: list[str]) -> str:
    return f"'{name}' is not declared in namespace {ns.name}, " + did_you_mean(
        name, names, f"allowed: a {kind} the file declares there ({', '.join(names) or 'none'})")


def _cycles(ns: NamespaceSpec, problems: Problems, spell) -> None:
    queues = {q.name.lower(): q for q in ns.queues}
    state: dict[str, str] = {}

    def visit(key: str, chain: list[str]) -> None:
        if state.get(key) == "done":
            return
        if state.get(key) == "visiting":
            cycle = [*chain[chain.index(queues[key].name):], queues[key].name]
            problems.add(f"{ns.name}/{cycle[0]}", spell("forward_to"), f"{' -> '.join(cycle)} is a "
                         "forwarding cycle, allowed: chains that end at an entity that does not forward")
            return
        state[key] = "visiting"
        for target in _targets(queues[key].properties):
            if target.lower() in queues:
                visit(target.lower(), [*chain, queues[key].name])
        state[key] = "done"

    for key in queues:
        visit(key, [])

