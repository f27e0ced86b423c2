"""The replication side of a drill: the Functions app (`function_app.py`) run by the local Functions host,
`sbfed functions run`, in its own process, exactly as a developer runs it against two namespaces."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

STOP_TIMEOUT_SECONDS = 60.0
START_TIMEOUT_SECONDS = 60.0
RUNNING_LINE = b"sbfed functions: running"


class FunctionsHostError(RuntimeError):
    """The host did not start; the message points at its log."""


def function_app_path() -> Path:
    """The repository's `function_app.py` (installed as a top-level module), found without importing it."""
    spec = importlib.util.find_spec("function_app")
    if spec is None or spec.origin is None:
        raise FunctionsHostError("function_app.py is not importable: install sbfed (`pip install -e .`)")
    return Path(spec.origin)


class FunctionsHostProcess:
    """`sbfed functions run --topology FILE` with the connection settings and audit sink in its environment;
    stopped with SIGTERM, which lets in-flight batches finish and settle."""

    def __init__(
        self, topology_path: Path, settings: Mapping[str, str], log_path: Path, *, stats_interval: float = 5.0
    ) -> None:
        self.topology_path, self.settings, self.log_path = topology_path, dict(settings), log_path
        self.stats_interval = stats_interval
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "sbfed",
            "functions",
            "run",
            "--app",
            str(function_app_path()),
            "--topology",
            str(self.topology_path),
            "--stats-interval",
            str(self.stats_interval),
            "-v",
        ]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.settings},
            )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while RUNNING_LINE not in self.log_path.read_bytes():
            if self._process.poll() is not None:
                raise FunctionsHostError(
                    f"`sbfed functions run` exited with {self._process.returncode}; see {self.log_path}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise FunctionsHostError(
                    f"the Functions host did not start within {START_TIMEOUT_SECONDS:.0f} s;"
                    f" see {self.log_path}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
