"""The sbfed commands a drill runs as processes of their own: `sbfed broker serve` and `sbfed functions run`
started with their output in a log file, waited for until they say they are ready, stopped with SIGTERM;
`sbfed topology apply` run to its end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path


class ProcessStartError(RuntimeError):
    """A command exited or did not get ready in time; the message points at its log."""


class SbfedProcess:
    """`python -m sbfed <argv>` with `env` added to this process's environment."""

    def __init__(self, what: str, argv: list[str], log_path: Path,
                 env: Mapping[str, str] | None = None) -> None:
        self.what, self.argv, self.log_path, self.env = what, argv, log_path, dict(env or {})
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, ready: Callable[[], bool], timeout: float) -> None:
        """Start the process and wait until `ready()` says so."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "sbfed", *self.argv], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env={**os.environ, **self.env})
        deadline = time.monotonic() + timeout
        while not ready():
            if self._process.poll() is not None:
                code = self._process.returncode
                raise ProcessStartError(f"{self.what} exited with {code}; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop(timeout=10)
                raise ProcessStartError(f"{self.what} was not ready within {timeout:.0f} s; "
                                        f"see {self.log_path}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: the process ends at once, as when its machine dies (nothing is finished or settled)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def stop(self, timeout: float) -> None:
        """SIGTERM (both commands shut down cleanly on it), then SIGKILL after `timeout` seconds."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_sbfed(what: str, argv: list[str], log_path: Path, env: Mapping[str, str] | None = None,
              timeout: float = 120.0) -> None:
    """`python -m sbfed <argv>` run to its end, its output in `log_path`; a failure points at the log."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        try:
            code = subprocess.run([sys.executable, "-m", "sbfed", *argv], stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env={**os.environ, **(env or {})}, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            raise ProcessStartError(f"{what} did not finish within {timeout:.0f} s; see {log_path}") from None
    if code:
        raise ProcessStartError(f"{what} exited with {code}; see {log_path}")
