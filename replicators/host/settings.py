"""App settings for a local run: `local.settings.json`'s `Values`, as Core Tools uses them, under the
process environment (a variable already set wins, so a test or a shell can override a file)."""

from __future__ import annotations

import json
import os
from collections.abc import MutableMapping
from pathlib import Path


def load_local_settings(path: str | Path | None) -> dict[str, str]:
    if path is None or not Path(path).exists():
        return {}
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    values = raw.get("Values") or {}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: `Values` must be an object of app settings")
    return {str(k): str(v) for k, v in values.items()}


def apply_settings(values: dict[str, str], environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Export the settings the environment does not already define; the app reads them from os.environ."""
    for name, value in values.items():
        environ.setdefault(name, value)
    return {name: environ[name] for name in values}
