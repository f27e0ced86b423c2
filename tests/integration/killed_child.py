"""A child process that acknowledges operations line by line, killed with SIGKILL mid-stream: what the kill
tests share (test_durability, test_geo_kill)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_until_killed(script: str, args: list[str], record: Callable[[str], None],
                     enough: Callable[[], bool]) -> None:
    """Run `script` with `args`, pass each line it prints to `record` until `enough()`, kill it with SIGKILL,
    then pass what it had printed before dying (a line cut by the kill does not count)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True,
                             env=env, cwd=REPO)
    assert child.stdout is not None
    try:
        while not enough():
            line = child.stdout.readline()
            assert line, "the child stopped before being killed"
            record(line)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    for line in child.stdout.read().splitlines(keepends=True):
        if line.endswith("\n"):
            record(line)
