"""Packages whose modules import one way: no module reaches itself through the imports of its own package
(issue 28). Every import counts, at the top of a module, inside a function or under TYPE_CHECKING: a
circle of type hints is the same tangle to a reader."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ONE_WAY = ["patterns.drills", "spark_reconcile"]


def imports(package: str) -> dict[str, set[str]]:
    """Each module of `package` and the modules of the same package it imports."""
    folder = ROOT / package.replace(".", "/")
    modules = {f"{package}.{path.stem}": path for path in folder.glob("*.py") if path.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package itself
                    base = ".".join([package, *([base] if base else [])])
                targets |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules along it (the first back to the start), or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return [*path[path.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        state[module] = "done"
        path.pop()
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


@pytest.mark.parametrize("package", ONE_WAY)
def test_the_package_imports_one_way(package: str) -> None:
    graph = imports(package)
    assert len(graph) > 3, f"no modules found under {package}"
    found = cycle(graph)
    assert found is None, "import circle: " + " -> ".join(found or [])


def test_a_circle_is_found_however_it_is_imported() -> None:
    """The finder itself: a circle through `from a import b`, a plain import and a back edge."""
    graph = {"p.run": {"p.catalog"}, "p.catalog": {"p.recipes"}, "p.recipes": {"p.scenarios"},
             "p.scenarios": {"p.run", "p.metrics"}, "p.metrics": set()}
    assert cycle(graph) == ["p.catalog", "p.recipes", "p.scenarios", "p.run", "p.catalog"]
    graph["p.scenarios"] = {"p.metrics"}
    assert cycle(graph) is None
