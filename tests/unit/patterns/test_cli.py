"""`sbfed topology generate` writes what the pattern functions build; bad input exits 2 with a reason."""

import pytest

from patterns.cli import main
from patterns.federation import active_passive, spillover
from patterns.recipes import splitting_and_routing
from topology import load


@pytest.mark.parametrize("argv, expected", [
    (["active-passive", "--namespaces", "east,west", "--ttl", "PT90S"],
     active_passive("east", "west", ttl="PT90S")),
    (["spillover", "--namespaces", "a,b", "--entity", "jobs", "--deadline", "PT1M"],
     spillover(["a", "b"], "jobs", deadline="PT1M")),
    (["spillover", "--namespaces", "a,b", "--over", "subscription"],
     spillover(["a", "b"], over="subscription")),
    (["routing", "--namespaces", "hub", "--route", "eu=region = 'eu'"],
     splitting_and_routing("hub", {"eu": "region = 'eu'"})),
])
def test_generate_writes_the_pattern(tmp_path, argv, expected, capsys):
    out = tmp_path / "topology.yaml"
    assert main(["generate", *argv, "--out", str(out)]) == 0
    assert load(out) == expected
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["generate", "active-passive", "--namespaces", "a,b,c"], "exactly two namespaces"),
    (["generate", "routing", "--namespaces", "hub", "--route", "eu"], "expected NAMESPACE=SQL"),
    (["generate", "routing", "--namespaces", "hub", "--route", "eu=p('region') = 'eu'"],
     "sbfed topology generate: filter \"p('region') = 'eu'\", column 1: p(): a route may read only"),
    (["generate", "active-passive", "--ttl", "2m"], "not an ISO 8601 duration"),
])
def test_generate_refuses_bad_input(tmp_path, argv, message, capsys):
    assert main([*argv, "--out", str(tmp_path / "t.yaml")]) == 2
    assert message in capsys.readouterr().err


def test_apply_needs_a_connection_for_every_namespace(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PRIMARY", raising=False)
    monkeypatch.delenv("SECONDARY", raising=False)
    topology = tmp_path / "t.yaml"
    main(["generate", "active-passive", "--out", str(topology)])
    assert main(["apply", "--topology", str(topology), "--namespace", "tertiary=Endpoint=sb://x/"]) == 2
    assert "--namespace tertiary: not in" in capsys.readouterr().err
    assert main(["apply", "--topology", str(topology), "--namespace", "primry=Endpoint=sb://x/"]) == 2
    assert f"--namespace primry: not in {topology}, did you mean primary?" in capsys.readouterr().err
    assert main(["apply", "--topology", str(topology)]) == 2
    assert "pass --namespace primary=<connection string> or set PRIMARY" in capsys.readouterr().err
    amqp = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=s;UseDevelopmentEmulator=true"
    assert main(["apply", "--topology", str(topology), "--namespace", f"primary={amqp}"]) == 2
    assert "admin connection string" in capsys.readouterr().err
