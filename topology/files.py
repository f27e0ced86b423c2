"""Reading and writing topology files. YAML (of which JSON is a subset), either the sbfed format or the
emulator's Config.json; `load` raises one `TopologyError` listing every problem of the file.

Checks that need more than this package (the SQL grammar lives in the broker's rules) are registered with
`add_check` by the command that runs them; each returns problem lines in the same form.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from topology import emulator, native, order
from topology.model import Topology, TopologyError
from topology.problems import Problems

Check = Callable[[Topology], list[str]]
_CHECKS: list[Check] = []


def add_check(check: Check) -> None:
    """Run `check` on every topology read from now on (once, however often it is added)."""
    if check not in _CHECKS:
        _CHECKS.append(check)


def load(path: str | os.PathLike[str]) -> Topology:
    """Read and validate a topology file or an emulator Config.json."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyError(f"{source}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TopologyError(f"{source}: not UTF-8 text, allowed: a YAML or JSON file") from None
    problems = Problems(source)
    try:
        document = yaml.load(text, Loader=_StrictLoader)
    except _DuplicateKey as exc:
        problems.add(f"line {exc.line}", repr(exc.key), "duplicate key, allowed: each name once")
        problems.raise_if_any()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problems.add(where, "", f"not valid YAML or JSON: {getattr(exc, 'problem', None) or exc}")
        problems.raise_if_any()
    return parse(document, source)


def parse(document: Any, source: str = "topology") -> Topology:
    """Validate a parsed document (the sbfed format or a Config.json) and build the model."""
    problems = Problems(source)
    if not isinstance(document, dict):
        problems.add("", "", "expected a mapping with `namespaces` (sbfed) or `UserConfig` (emulator "
                     "Config.json)")
        problems.raise_if_any()
    reader = emulator if "UserConfig" in document else native
    topology = reader.read(document, problems)
    order.check(topology, problems)
    if not problems.lines:
        for check in _CHECKS:
            problems.lines += check(topology)
    problems.raise_if_any()
    return topology


def dump(topology: Topology, path: str | os.PathLike[str]) -> None:
    """Write a topology file in the sbfed format; `.json` gets JSON, anything else YAML."""
    path = Path(path)
    data = topology.to_dict()
    if path.suffix == ".json":
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line = key, line


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | bool | float) and key in seen:
                raise _DuplicateKey(key, key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)
