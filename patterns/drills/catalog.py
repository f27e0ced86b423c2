"""Every drill `sbfed drill` runs, by name: the three federation patterns, the recipes, stream-to-queue
and Geo-Replication. A new drill is a scenario (scenario.py) listed here; nothing else changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from patterns.drills.drill import DrillSettings
from patterns.drills.geo import GEO_REPLICATION
from patterns.drills.recipes import RECIPES
from patterns.drills.scenario import Scenario
from patterns.drills.scenarios import PATTERNS
from patterns.drills.stream import StreamToQueue

SCENARIOS: dict[str, type[Scenario]] = {
    s.pattern: s for s in (*PATTERNS, *RECIPES, StreamToQueue, *GEO_REPLICATION)
}


def drill_settings(pattern: str, out: Path, namespaces: tuple[str, ...] = (),
                   **options: Any) -> DrillSettings:
    """The settings of the drill named `pattern`, with its namespaces (default: the scenario's own) checked
    against what it takes; ValueError for an unknown drill or the wrong namespaces."""
    if pattern not in SCENARIOS:
        raise ValueError(f"unknown pattern '{pattern}': choose one of {', '.join(SCENARIOS)}")
    names = SCENARIOS[pattern].checked_namespaces(namespaces)
    return DrillSettings(pattern, out, namespaces=names, **options)
