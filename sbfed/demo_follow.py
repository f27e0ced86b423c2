"""`sbfed demo`'s follow section: `sbfed reconcile --follow` watching one drill's audit logs while the drill
writes them, so its verdicts (the outage's among them) appear before the drill ends.

The query runs as its own process (its own JVM, started in parallel with the drill) on the same logs and
mode arguments as the drill's batch reconciliation, with a short trigger and the least lookahead follow
mode takes (grace + skew). After the drill it gets one micro-batch over the files the drill published as it
closed, then SIGTERM (which it handles: it stops the query and prints its counts). A key is final only once
every log has come the lookahead past it, so the drill's last seconds stay open: the follow mode's final
counts are a part of the batch job's, and they must agree with it (no `missing` where it says none).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

TRIGGER = "3s"
LOOKAHEAD = "15s"  # the demo's grace (10 s) plus reconcile's default skew (5 s): the least --follow takes
CATCH_UP_S = 90.0  # at most this long after the drill for a micro-batch over its last files
RUNNING_S = 120.0  # at most this long for the query to run before the drill's clients start
FOLLOW_WARMUP_S = 20.0  # the followed drill's warm-up (drills take 5 s): traffic for the first micro-batches
STOP_S = 60.0  # after SIGTERM: the query lets its micro-batch in progress end (45 s at most), then stops
PREFIX = "[follow]"


@dataclass(frozen=True)
class FollowCounts:
    """A follow run's final verdicts summed over its comparisons (status/<target>.json)."""

    final: int  # keys whose verdict is final
    ok: int
    late: int
    missing: int
    expired: int
    orphan: int
    original: int  # messages written straight to the target (the failover's sends)
    open: int  # keys still waiting for their verdict
    micro_batch: int

    def line(self) -> str:
        return (f"final {self.final} (ok {self.ok}, late {self.late}, missing {self.missing}, expired "
                f"{self.expired}, orphan {self.orphan}, originals {self.original}), open {self.open}, "
                f"micro-batch {self.micro_batch}")


def _statuses(out: Path) -> list[dict]:
    """status/<target>.json of every comparison; a file the query is rewriting is read again."""
    for _ in range(10):
        try:
            return [json.loads(path.read_text(encoding="utf-8"))
                    for path in sorted((out / "status").glob("*.json"))]
        except (OSError, ValueError):
            time.sleep(0.1)
    return []


def read_counts(out: Path) -> tuple[FollowCounts | None, datetime | None]:
    """The counts in the status files and when their micro-batch began (None, None before the first)."""
    statuses = _statuses(out)
    if not statuses:
        return None, None

    def total(name: str) -> int:
        return sum(s["final"][name] for s in statuses)

    final = sum(total(name) for name in ("ok", "late", "missing", "expired", "orphan", "original"))
    counts = FollowCounts(final, total("ok"), total("late"), total("missing"), total("expired"),
                          total("orphan"), total("original"), sum(s["open"]["keys"] for s in statuses),
                          min(s["micro_batch"] for s in statuses))
    return counts, min(datetime.fromisoformat(s["updated_at"]) for s in statuses)


class FollowRun:
    """One `sbfed reconcile --follow` process beside a drill; its output goes to `root`/follow.log and its
    status lines, prefixed, to the demo's output."""

    def __init__(self, root: Path, arguments: list[str], logs: list[Path]) -> None:
        self.root, self.logs = root, logs
        self.out, self.checkpoint, self.log = root / "out", root / "checkpoint", root / "follow.log"
        self.argv = [*arguments, "--lookahead", LOOKAHEAD, "--format", "json", "--follow", "--checkpoint",
                     str(self.checkpoint), "--trigger", TRIGGER, "--out", str(self.out)]
        self.process: subprocess.Popen[bytes] | None = None
        self.began = 0.0
        self.at_drill_end: FollowCounts | None = None
        self.final: FollowCounts | None = None
        self.outcome = "not started"
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Start the query on a fresh checkpoint; the log folders must exist when Spark's file source
        starts."""
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        for folder in self.logs:
            folder.mkdir(parents=True, exist_ok=True)
        print(f"{PREFIX} $ sbfed reconcile {' '.join(self.argv)}  (output: {self.log})", flush=True)
        self.began = time.monotonic()
        self.process = subprocess.Popen([sys.executable, "-m", "sbfed", "reconcile", *self.argv],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        self._reader = threading.Thread(target=self._relay, name="follow-output", daemon=True)
        self._reader.start()

    def wait_until_running(self) -> None:
        """Hold the drill's clients until the query runs (Spark writes its checkpoint's metadata when the
        query starts): its JVM starts while the broker and the Functions host do, and its micro-batches then
        keep pace with the drill's traffic instead of beginning as the drill ends."""
        marker = self.checkpoint / "spark" / "metadata"
        deadline = time.monotonic() + RUNNING_S
        while self._running() and not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        waited = f"+{time.monotonic() - self.began:.0f} s"
        if marker.exists():
            print(f"{PREFIX} {waited} the query runs; the drill's clients start", flush=True)
        else:
            print(f"{PREFIX} {waited} the query is not running yet ({self.log}); the drill goes on",
                  flush=True)

    def _relay(self) -> None:
        """Everything to follow.log; each finished micro-batch (with the counts so far) and any ERROR line
        to the demo's output."""
        assert self.process is not None and self.process.stdout is not None
        with open(self.log, "wb") as log:
            for raw in self.process.stdout:
                log.write(raw)
                log.flush()
                line = raw.decode("utf-8", "replace").rstrip()
                if " INFO micro-batch " in line:
                    counts, _ = read_counts(self.out)
                    so_far = f"; {counts.line()}" if counts else ""
                    print(f"{PREFIX} +{time.monotonic() - self.began:.0f} s "
                          f"{line.split(' INFO ', 1)[1]}{so_far}", flush=True)
                elif " ERROR " in line:
                    print(f"{PREFIX} {line}", flush=True)

    def drill_ended(self) -> None:
        """Note what was final when the drill ended, give the query its last micro-batch, stop it."""
        self.at_drill_end, _ = read_counts(self.out)
        if self.at_drill_end is None or self.at_drill_end.final == 0:
            print(f"{PREFIX} no verdict was final before the drill ended (the query's JVM and micro-batches "
                  "were slower than the drill on this machine); not a failure of the drill", flush=True)
        else:
            print(f"{PREFIX} final before the drill ended: {self.at_drill_end.line()}", flush=True)
        ended = datetime.now().astimezone()
        deadline = time.monotonic() + CATCH_UP_S
        while self._running() and time.monotonic() < deadline:
            _, began = read_counts(self.out)
            if began is not None and began > ended:
                break
            time.sleep(0.5)
        self.stop()

    def _running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM (the query stops after its micro-batch); killed if it does not exit within STOP_S."""
        if self.process is None or self.outcome != "not started":
            return
        if self._running():
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        if self._reader is not None:
            self._reader.join(10)
        self.final, _ = read_counts(self.out)
        if code == 0:
            self.outcome = "stopped"
        elif code == -signal.SIGTERM and self.final is None:  # stopped before the query had started
            self.outcome = "stopped before its first micro-batch"
        else:
            self.outcome = f"exited with {code}; see {self.log}"
        print(f"{PREFIX} {self.outcome}: {self.final.line() if self.final else 'no status written'}",
              flush=True)

    def compare(self, batch_missing: int | None) -> tuple[str, bool]:
        """A line setting the follow run's final counts beside the batch job's, and whether they agree: the
        follow run may have left keys open, but it must not call a message missing the batch job found."""
        if self.outcome.startswith("exited"):
            return f"follow: {self.outcome}", False
        if self.final is None:
            return f"follow: {self.outcome}, no final verdict to compare", True
        before = self.at_drill_end.final if self.at_drill_end else 0
        if batch_missing is None:
            return (f"follow: {self.final.line()}; {before} final before the drill ended; the batch job did "
                    "not run, nothing to compare"), True
        agrees = self.final.missing <= batch_missing
        verdict = "agrees with the batch job" if agrees else (
            f"DISAGREES: {self.final.missing} missing where the batch job found {batch_missing}")
        return (f"follow: {self.final.line()}; {before} final before the drill ended; batch missing "
                f"{batch_missing}; {verdict}"), agrees
