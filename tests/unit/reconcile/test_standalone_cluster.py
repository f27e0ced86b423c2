"""The job unchanged under spark-submit on a real Spark standalone cluster (a master and a worker started
from the installed pyspark, on loopback)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pyspark
import pytest

from .planted import replica_logs

REPO = Path(__file__).resolve().parents[3]
SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_env() -> dict[str, str]:
    return dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
                PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_NO_DAEMONIZE="1")


def start(args: list[str], log: Path, ready: str, timeout: float = 120) -> subprocess.Popen:
    """Run a spark-class daemon in the foreground and wait until its log says `ready`."""
    handle = log.open("w")
    proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=spark_env(), stdout=handle,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while ready not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{args[0]} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    return proc


@pytest.fixture
def cluster(tmp_path):
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                  "--webui-port", str(free_port())]
        procs.append(start(master, tmp_path / "master.log", "I have been elected leader"))
        worker = ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "2",
                  "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(tmp_path / "work")]
        procs.append(start(worker, tmp_path / "worker.log", "Successfully registered with master"))
        yield url
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.mark.slow
def test_spark_submit_to_a_standalone_cluster(cluster, tmp_path):
    primary, secondary, truth = replica_logs(tmp_path / "logs")
    package = tmp_path / "spark_reconcile.zip"
    with zipfile.ZipFile(package, "w") as z:
        for f in (REPO / "spark_reconcile").glob("*.py"):
            z.write(f, f"spark_reconcile/{f.name}")
    out = tmp_path / "out"
    done = subprocess.run(
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster, "--py-files", str(package),
         "--executor-memory", "512m", "--conf", "spark.ui.enabled=false",
         str(REPO / "spark_reconcile" / "__main__.py"),
         "--log", f"primary={primary}", "--log", f"secondary={secondary}", "--out", str(out),
         "--from", "2026-11-22T23:00:00Z", "--to", "2026-11-23T01:00:00Z"],
        env=spark_env(), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-3000:]  # planted gaps
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"]["master"] == cluster
    totals = summary["comparisons"][0]["totals"]
    for status in ("ok", "late", "pending", "missing", "expired", "orphan"):
        assert totals[status] == truth.count(status), status
    assert {(r["entity"], r["message_id"]) for r in summary["samples"]["missing"]} == {
        k for k, v in truth.status.items() if v == "missing"}
