"""A namespace's `geo_replication` block: Service Bus Geo-Replication (Premium) declared in the topology.

    geo_replication:
      regions: [westeurope, northeurope]   # every region holding a replica, the primary among them
      primary: westeurope                  # default: the first region
      mode: asynchronous                   # or synchronous (Azure: maxReplicationLagDurationInSeconds 0)
      max_lag: PT5M                        # asynchronous only: the primary throttles beyond this lag

Azure accepts a maximum lag of 0 (synchronous) or 5 minutes to 1 day; the local broker accepts any positive
lag (drills need seconds) and the Bicep rendering refuses what Azure would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from topology.durations import format_duration, parse_duration

MODES = ("synchronous", "asynchronous")
KEYS = ("regions", "primary", "mode", "max_lag")
DEFAULT_MAX_LAG = timedelta(minutes=5)  # Azure's smallest asynchronous lag


@dataclass
class GeoReplicationSpec:
    regions: list[str] = field(default_factory=list)
    primary: str = ""
    mode: str = "asynchronous"
    max_lag: timedelta = DEFAULT_MAX_LAG

    @property
    def secondaries(self) -> list[str]:
        return [r for r in self.regions if r != self.primary]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"regions": list(self.regions), "primary": self.primary, "mode": self.mode}
        if self.mode == "asynchronous":
            out["max_lag"] = format_duration(self.max_lag)
        return out


def read_geo(raw: Any, where: str, problems: Any) -> GeoReplicationSpec | None:
    """The block checked into problems (one line each); None when absent or unusable."""
    if raw is None:
        return None
    where = f"{where}/geo_replication"
    if not isinstance(raw, dict):
        problems.add(where, "", f"{type(raw).__name__} where a mapping is expected")
        return None
    for key in raw:
        if key not in KEYS:
            problems.add(where, str(key), f"unknown key, allowed: {', '.join(KEYS)}")
    regions = raw.get("regions")
    if (not isinstance(regions, list) or len(regions) < 2
            or not all(isinstance(r, str) and r.strip() for r in regions)):
        problems.add(where, "regions", "a list of at least two region names is required (the primary's "
                     "and a secondary's)")
        return None
    if len({r.lower() for r in regions}) != len(regions):
        problems.add(where, "regions", "a region is named twice")
    spec = GeoReplicationSpec(regions=list(regions), primary=str(raw.get("primary") or regions[0]))
    if spec.primary not in regions:
        problems.add(where, "primary", f"{spec.primary!r} is not one of the regions ({', '.join(regions)})")
    mode = raw.get("mode", "asynchronous")
    if mode not in MODES:
        problems.add(where, "mode", f"{mode!r} is not a replication mode, allowed: {', '.join(MODES)}")
    else:
        spec.mode = mode
    if "max_lag" in raw:
        if spec.mode == "synchronous":
            problems.add(where, "max_lag", "only asynchronous replication has a maximum lag")
        else:
            try:
                spec.max_lag = parse_duration(raw["max_lag"])
            except ValueError as exc:
                problems.add(where, "max_lag", str(exc))
            else:
                if spec.max_lag <= timedelta(0):
                    problems.add(where, "max_lag", "must be longer than zero")
    return spec
