"""Every problem of a topology, one line each: `file: namespace/entity: property: what is wrong, what is
allowed`. Readers report into a `Problems` and keep going, so a file shows all its problems at once."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from topology.durations import TIMESPAN_MAX, format_duration, parse_duration
from topology.model import TopologyError
from topology.schema import ENTITY_NAME, MAX_ENTITY_NAME, MAX_SEGMENT_NAME, NAME_RULE, RULE_NAME, Property


class Problems:
    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: list[str] = []

    def add(self, where: str, name: str, message: str) -> None:
        """`where` is the namespace/entity path ('' for the file itself), `name` the key as written."""
        self.lines.append(": ".join(part for part in (self.source, where, name, message) if part))

    def raise_if_any(self) -> None:
        if self.lines:
            raise TopologyError(self.lines)


def unknown_key(key: Any, allowed: Iterable[str], what: str = "property") -> str:
    """`unknown property, did you mean lock_duration?` (or the allowed names when nothing is close)."""
    allowed = sorted(allowed)
    squashed = {name.replace("_", "").lower(): name for name in allowed}
    guess = squashed.get(str(key).replace("_", "").replace("-", "").lower())
    guess = guess or next(iter(difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)), None)
    if guess:
        return f"unknown {what}, did you mean {guess}?"
    return f"unknown {what}, allowed: {', '.join(allowed)}"


def did_you_mean(name: Any, declared: Iterable[str], otherwise: str) -> str:
    """`did you mean orders?` when a declared name is close to a mistyped reference (case does not count,
    as in Service Bus names), else `otherwise` (what is allowed)."""
    by_lower = {str(d).lower(): str(d) for d in declared}
    close = difflib.get_close_matches(str(name).lower(), list(by_lower), n=1, cutoff=0.6)
    return f"did you mean {by_lower[close[0]]}?" if close else otherwise


def checked_properties(table: Mapping[str, Property], values: Mapping[Any, Any], where: str,
                       problems: Problems, spelling: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Properties by the schema's names, each value checked; `spelling` maps the names the file writes to
    the schema's (the emulator's PascalCase), where an empty string means "not set"."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = (spelling or {k: k for k in table}).get(key)
        if name is None:
            problems.add(where, str(key), unknown_key(key, spelling or table))
            continue
        if spelling is not None and value == "":
            continue
        problem = check_value(table[name], value)
        if problem:
            problems.add(where, str(key), problem)
        out[name] = value
    return out


def check_value(spec: Property, value: Any) -> str | None:
    """What is wrong with a property value (None: nothing)."""
    if spec.kind == "duration":
        return _duration_problem(spec, value)
    if spec.kind == "bool":
        return None if isinstance(value, bool) else f"{value!r} is not true or false"
    if spec.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{value!r} is not a whole number, allowed {spec.low} to {spec.high}"
        if not spec.low <= value <= spec.high:
            return f"{value} is out of range, allowed {spec.low} to {spec.high}"
        return None
    if spec.kind == "entity":
        return entity_name_problem(value)
    if spec.kind == "choice":
        return None if value in spec.choices else f"{value!r} is not a status, allowed: " \
            f"{', '.join(spec.choices)}"
    if not isinstance(value, str):
        return f"{value!r} is not text"
    if len(value) > spec.high:
        return f"{len(value)} characters is too long, allowed at most {spec.high}"
    return None


def _duration_problem(spec: Property, value: Any) -> str | None:
    try:
        duration = parse_duration(value) if isinstance(value, str) else None
    except ValueError as exc:
        return str(exc)
    if duration is None:
        return f"{value!r} is not an ISO 8601 duration (for example PT30S, PT5M, P14D)"
    if spec.low <= duration <= spec.high:
        return None
    low = format_duration(spec.low)
    allowed = f"{low} or longer" if spec.high == TIMESPAN_MAX else f"{low} to {format_duration(spec.high)}"
    return f"{value} is out of range, allowed {allowed}"


def check_entity_name(name: Any, where: str, label: str, problems: Problems) -> None:
    """Report an invalid entity name under `label` (the file format's own spelling of the key)."""
    problem = entity_name_problem(name)
    if problem:
        problems.add(where, label, problem)


def check_segment_name(kind: str, name: str, where: str, label: str, problems: Problems) -> None:
    """Report an invalid subscription or rule name (one segment of at most MAX_SEGMENT_NAME; a rule's may
    start with '$', as $Default does) under `label`, the file format's own spelling of the key."""
    valid = (RULE_NAME.match(name) is not None if kind == "rule"
             else entity_name_problem(name) is None and "/" not in name)
    if len(name) > MAX_SEGMENT_NAME or not valid:
        problems.add(where, label, f"'{name}' is not a {kind} name, allowed {NAME_RULE} "
                     f"(at most {MAX_SEGMENT_NAME})")


def entity_name_problem(name: Any) -> str | None:
    if not isinstance(name, str) or not name:
        return f"{name!r} is not an entity name, allowed {NAME_RULE}"
    if len(name) > MAX_ENTITY_NAME or not ENTITY_NAME.match(name):
        return f"'{name}' is not an entity name, allowed {NAME_RULE} (at most {MAX_ENTITY_NAME})"
    return None
