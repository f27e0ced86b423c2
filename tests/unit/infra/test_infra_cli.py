"""`sbfed infra params`: options, environment defaults (the azd hook), errors and exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from patterns import infra_cli
from sbfed import cli

from .bicep import FIXTURES

LOCATION_MAP = "primary=westeurope, secondary=northeurope"


def _project(tmp_path: Path, pattern: str = "all-active") -> Path:
    """A project folder with the topology file inside it, as azd deploys it."""
    (tmp_path / "topologies").mkdir()
    shutil.copy(FIXTURES / f"{pattern}.yaml", tmp_path / "topologies" / f"{pattern}.yaml")
    return tmp_path


def _values(path: Path) -> dict:
    return {k: v["value"] for k, v in json.loads(path.read_text())["parameters"].items()}


def test_params_writes_the_parameters_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = _project(tmp_path)
    out = project / "infra" / "main.parameters.json"
    code = infra_cli.main(["params", "--topology", str(project / "topologies" / "all-active.yaml"),
                           "--out", str(out), "--location-map", LOCATION_MAP, "--app-root", str(project),
                           "--hosting", "premium", "--name-prefix", "sbfed-test",
                           "--app-location", "westeurope", "--operator-principal-id", ""])
    assert code == 0
    values = _values(out)
    assert values["topologyFile"] == "topologies/all-active.yaml"
    assert (values["hosting"], values["namePrefix"], values["location"], values["operatorPrincipalId"]) == (
        "premium", "sbfed-test", "westeurope", "")
    assert [ns["location"] for ns in values["namespaces"]] == ["westeurope", "northeurope"]
    summary = "2 namespaces, 2 queues/topics, 4 rules, 6 Service Bus role assignments, 2 connection settings"
    assert summary in capsys.readouterr().out


def test_the_azd_hook_runs_it_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """azure.yaml's preprovision hook passes only --out; the rest comes from `azd env set` values."""
    project = _project(tmp_path, "spillover")
    monkeypatch.chdir(project)
    monkeypatch.setenv("SBFED_TOPOLOGY_FILE", "topologies/spillover.yaml")
    monkeypatch.setenv("SBFED_LOCATION_MAP", LOCATION_MAP)
    monkeypatch.setenv("SBFED_SKU", "Premium")
    assert cli.main(["infra", "params", "--out", "infra/main.parameters.json"]) == 0
    values = _values(project / "infra" / "main.parameters.json")
    assert values["topologyFile"] == "topologies/spillover.yaml"
    assert values["hosting"] == "flex" and values["namePrefix"] == "${AZURE_ENV_NAME}"
    assert {ns["sku"] for ns in values["namespaces"]} == {"Premium"}


@pytest.mark.parametrize("args,message", [
    ([], "pass --topology FILE or set SBFED_TOPOLOGY_FILE"),
    (["--location-map", "primary=westeurope"], "add secondary=<region> to the location map"),
    (["--location-map", "primary"], "expected <namespace>=<region>"),
    (["--location-map", LOCATION_MAP, "--out", "infra/main.bicepparam"], "only ARM parameter files"),
    (["--location-map", LOCATION_MAP, "--app-root", "sub"], "outside the app root"),
])
def test_errors_exit_2_with_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str], args: list[str],
                                      message: str) -> None:
    project = _project(tmp_path)
    (project / "sub").mkdir()
    monkeypatch.chdir(project)
    monkeypatch.delenv("SBFED_TOPOLOGY_FILE", raising=False)
    monkeypatch.delenv("SBFED_LOCATION_MAP", raising=False)
    if args and "--topology" not in args:
        args = ["--topology", "topologies/all-active.yaml", *args]
    assert infra_cli.main(["params", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sbfed infra params: error: ") and message in err
    assert not (project / "infra" / "main.parameters.json").exists()


def test_an_invalid_topology_prints_its_problems_one_per_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    args = ["params", "--location-map", LOCATION_MAP, "--topology"]
    assert infra_cli.main([*args, "topologies/missing.yaml"]) == 2
    assert capsys.readouterr().err == "topologies/missing.yaml: cannot read: No such file or directory\n"
    (project / "topologies" / "bad.yaml").write_text(
        "namespaces:\n  primary:\n    queues:\n      q: {lock_duration: PT10H, max_delivery_cnt: 3}\n")
    assert infra_cli.main([*args, "topologies/bad.yaml"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "topologies/bad.yaml: primary/q: lock_duration: PT10H is out of range, allowed PT5S to PT5M",
        "topologies/bad.yaml: primary/q: max_delivery_cnt: unknown property, did you mean "
        "max_delivery_count?"]


def test_local_broker_policies_are_noted_not_deployed(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    project = _project(tmp_path)
    topology = project / "topologies" / "all-active.yaml"
    text = topology.read_text().replace(
        "  primary:\n", "  primary:\n    policies:\n      sender-only: {key: c2VjcmV0, rights: [Send]}\n", 1)
    topology.write_text(text)
    out = project / "p.json"
    assert infra_cli.main(["params", "--topology", str(topology), "--out", str(out),
                           "--location-map", LOCATION_MAP, "--app-root", str(project)]) == 0
    assert "for the local broker only" in capsys.readouterr().err
    assert "c2VjcmV0" not in out.read_text()


def test_sbfed_help_lists_infra(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    assert "infra" in capsys.readouterr().out
