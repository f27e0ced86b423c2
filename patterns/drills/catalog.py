"""Every drill `sbfed drill` runs, by name: the three federation patterns and the recipes."""

from __future__ import annotations

from patterns.drills.recipes import RECIPES
from patterns.drills.scenarios import PATTERNS, Scenario

SCENARIOS: dict[str, type[Scenario]] = {s.pattern: s for s in (*PATTERNS, *RECIPES)}
