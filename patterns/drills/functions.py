"""The replication side of a drill: the Functions app (`function_app.py`) run by the local Functions host,
`sbfed functions run`, in its own process, exactly as a developer runs it against two namespaces."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from patterns.drills.processes import ProcessStartError, SbfedProcess

START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 60.0  # in-flight batches finish and settle first
RUNNING_LINE = b"sbfed functions: running"


def function_app_path() -> Path:
    """The repository's `function_app.py` (installed as a top-level module), found without importing it."""
    spec = importlib.util.find_spec("function_app")
    if spec is None or spec.origin is None:
        raise ProcessStartError("function_app.py is not importable: install sbfed (`pip install -e .`)")
    return Path(spec.origin)


def host_json_path() -> Path:
    """The app's host.json, packaged as replicators/host/app_host.json (a link to it in the repository): a
    wheel has no place for it beside the installed function_app.py."""
    return Path(str(resources.files("replicators.host") / "app_host.json"))


class FunctionsHostProcess:
    """`sbfed functions run --topology FILE` with the connection settings and the audit sink in its
    environment; stopped with SIGTERM, which lets in-flight batches finish and settle."""

    def __init__(self, topology_path: Path, settings: Mapping[str, str], log_path: Path,
                 *, stats_interval: float = 5.0) -> None:
        self.log_path = log_path
        self._process = SbfedProcess(
            "`sbfed functions run`",
            ["functions", "run", "--app", str(function_app_path()), "--host-json", str(host_json_path()),
             "--topology", str(topology_path),
             "--stats-interval", str(stats_interval), "-v"],
            log_path, settings)

    def start(self) -> None:
        self._process.start(lambda: RUNNING_LINE in self.log_path.read_bytes(), START_TIMEOUT_SECONDS)

    def stop(self) -> None:
        self._process.stop(STOP_TIMEOUT_SECONDS)

    def kill(self) -> None:
        """Kill the host mid-work; its log is kept beside (`<log>.killed`) for the next start's."""
        self._process.kill()
        if self.log_path.exists():
            self.log_path.replace(self.log_path.with_name(self.log_path.name + ".killed"))
