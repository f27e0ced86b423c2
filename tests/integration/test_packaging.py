"""sbfed as a user installs it: the wheel built from the repository holds everything `sbfed` needs at run
time, its metadata pins nothing exactly, and installed into a clean virtualenv (nothing of the repository on
the path) `sbfed --help` works and a broker it serves takes one message from the SDK and gives it back. And
`make`'s install (`-c constraints.txt -e .[dev]`) still resolves to exactly the pinned versions."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.doc_blocks import ROOT

pytestmark = pytest.mark.slow  # builds a wheel and installs its dependencies (pyspark) into a new venv

ROUND_TRIP = """
import sys
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

connection_string, admin_connection_string, cert = sys.argv[1:]
ServiceBusAdministrationClient.from_connection_string(
    admin_connection_string, connection_verify=cert).create_queue("orders")
with ServiceBusClient.from_connection_string(connection_string) as client:
    client.get_queue_sender("orders").send_messages(ServiceBusMessage("order 1"))
    with client.get_queue_receiver("orders", max_wait_time=10) as receiver:
        [message] = receiver.receive_messages(max_wait_time=10)
        receiver.complete_message(message)
print(str(message))
"""

LOCATE_APP = """
from patterns.drills.functions import function_app_path, host_json_path
print(function_app_path(), host_json_path().is_file())
"""


def _run(*command: str | Path, **kwargs) -> subprocess.CompletedProcess[str]:
    run = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=900, check=False,
                         **kwargs)
    assert run.returncode == 0, f"{command}:\n{run.stdout}{run.stderr}"
    return run


def _clean_env(**extra: str) -> dict[str, str]:
    """No PYTHONPATH, no virtualenv of the repository: only what the wheel installed."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | extra


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the repository's files (tracked and new, not ignored), built outside the worktree."""
    source, dist = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("dist")
    files = _run("git", "ls-files", "--cached", "--others", "--exclude-standard", cwd=ROOT).stdout.split()
    for name in files:
        if (ROOT / name).exists() or (ROOT / name).is_symlink():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name, follow_symlinks=False)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", dist, source)
    [built] = dist.glob("sbfed-*.whl")
    return built


def test_the_wheel_holds_what_sbfed_needs_at_run_time(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        host_json = archive.read("replicators/host/app_host.json")
        metadata = Parser().parsestr(archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
                                     .decode())
    console = ROOT / "local_broker" / "console"
    static = {str(f.relative_to(ROOT)) for f in (console / "static").iterdir()}
    assert {"sbfed/cli.py", "sbfed/testing.py", "function_app.py", "local_broker/rules/grammar.py"} <= names
    assert static and static <= names  # every file the console serves
    # the AMQP value codec compiled (a C compiler is here)
    assert [n for n in names if n.startswith("local_broker/wire/amqp/_speedups.") and n.endswith(".so")]
    assert json.loads(host_json) == json.loads((ROOT / "host.json").read_text())
    assert not [n for n in names if n.startswith(("tests/", "bench/", "docs/", "infra/"))]
    assert metadata["Requires-Python"] == ">=3.11"
    requirements = metadata.get_all("Requires-Dist")
    assert requirements and not [r for r in requirements if "==" in r.split(";")[0]]


def test_installed_into_a_clean_venv_sbfed_serves_a_round_trip(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    python, sbfed = venv / "bin" / "python", venv / "bin" / "sbfed"
    # --no-compile: byte-compiling pyspark's thousands of modules is most of the install, and checks nothing
    _run(python, "-m", "pip", "install", "--quiet", "--no-compile", "-c", ROOT / "constraints.txt", wheel,
         env=_clean_env())
    assert "broker" in _run(sbfed, "--help", cwd=tmp_path, env=_clean_env()).stdout
    ready = tmp_path / "ready.json"
    serve = subprocess.Popen(
        [sbfed, "broker", "serve", "--in-memory", "--amqp-port", "0", "--admin-port", "0", "--amqps-port",
         "0", "--websocket-port", "0", "--ready-file", ready], cwd=tmp_path, env=_clean_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert serve.poll() is None, serve.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.1)
        [namespace] = json.loads(ready.read_text())
        said = _run(python, "-c", ROUND_TRIP, namespace["connection_string"],
                    namespace["admin_connection_string"], namespace["cert_path"], cwd=tmp_path,
                    env=_clean_env())
        assert said.stdout.strip() == "order 1"
        with urllib.request.urlopen(f"http://127.0.0.1:{namespace['admin_port']}/$console/static/console.js",
                                    timeout=30) as answer:
            assert answer.status == 200 and b"function" in answer.read()
        located = _run(python, "-c", LOCATE_APP, cwd=tmp_path, env=_clean_env())
        assert located.stdout.startswith(str(venv)) and located.stdout.split()[-1] == "True"
    finally:
        serve.terminate()
        serve.wait(30)


def test_make_s_install_resolves_to_the_pinned_versions(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    _run(sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed", "--report",
         report, "-c", ROOT / "constraints.txt", "-e", f"{ROOT}[dev]")
    resolved = {_normalized(item["metadata"]["name"]): item["metadata"]["version"]
                for item in json.loads(report.read_text())["install"]}
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pinned = {_normalized(name): version
              for name, version in (line.strip().split("==") for line in lines if "==" in line)}
    resolved.pop("sbfed")
    assert resolved == pinned


def _normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them (prometheus_client is prometheus-client)."""
    return re.sub(r"[-_.]+", "-", name).lower()
