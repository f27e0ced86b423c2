"""The pytest plugin (`pytest -p sbfed.testing`) on a small user project (tests/pytest_plugin_project/), run
by pytest as a user runs it: its tests get a broker from one fixture, with the entities their markers
declare, or a topology file; a broken declaration stops the session with one line per problem."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1] / "pytest_plugin_project"


def _pytest(*args: str, env: dict[str, str] | None = None, ini: str = "pytest.ini",
            project: Path = PROJECT) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-c", ini, "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=project, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=300, check=False)


def test_the_example_project_passes_with_markers() -> None:
    run = _pytest()
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout


def test_a_topology_file_and_markers_are_hosted_together() -> None:
    run = _pytest("--sbfed-topology", "Config.json", env={"EXPECT_CONFIG_JSON": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout


def test_the_documented_ini_with_its_inline_comment_hosts_the_file() -> None:
    run = _pytest(ini="pytest-with-topology.ini", env={"EXPECT_CONFIG_JSON": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout


def test_a_broken_marker_stops_the_session_naming_its_test(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p sbfed.testing\n")
    (tmp_path / "test_late.py").write_text(
        "import pytest\n\n"
        "pytestmark = pytest.mark.sbfed_topology({'queues': {'late': {'lock_duration': 'PT10H'}}})\n\n\n"
        "def test_one(servicebus_connection_string):\n    pass\n\n\n"
        "def test_two(servicebus_connection_string):\n    pass\n\n\n"
        "@pytest.mark.sbfed_topology({'queues': {'orders': {}, 'q': {'forward_to': 'ordres'}}})\n"
        "def test_three(sbfed_broker):\n    pass\n")
    run = _pytest(project=tmp_path)
    output = run.stdout + run.stderr
    assert run.returncode == 4, output  # pytest's usage error: nothing ran
    problems = [line.removeprefix("ERROR: ") for line in run.stderr.splitlines() if line.strip()]
    assert problems == [
        "test_late.py: sbemulatorns/late: lock_duration: PT10H is out of range, allowed PT5S to PT5M",
        "test_late.py::test_three: sbemulatorns/q: forward_to: 'ordres' is not declared in namespace "
        "sbemulatorns, did you mean orders?"], output
    assert "Traceback" not in output and "passed" not in output and "sbfed-pytest-" not in output


def test_a_broken_declaration_stops_the_session_with_its_problems(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("namespaces:\n  sbemulatorns:\n    queues:\n      late: {lock_duration: PT10H}\n")
    run = _pytest("--sbfed-topology", str(broken))
    assert run.returncode != 0
    assert f"{broken}: sbemulatorns/late: lock_duration: PT10H is out of range, allowed PT5S to PT5M" in \
        run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
