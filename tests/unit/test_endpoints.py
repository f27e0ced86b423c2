"""Which ports and keys each namespace gets: the topology's, the command line's, what the data directory
remembers, then the emulator's defaults; and what is remembered."""

from __future__ import annotations

import stat

from local_broker.endpoints import PortChoice, choose, read_state, write_state
from topology import parse

EMULATOR = PortChoice(None, None, 5672, 5300)


def _specs(document: dict) -> list:
    return list(parse(document).namespaces.values())


def test_defaults_are_the_emulators_and_go_up_by_one_per_namespace() -> None:
    chosen = choose(_specs({"namespaces": {"a": {}, "b": {}}}), EMULATOR, {}, "127.0.0.1", "t.yaml")
    assert [(e.amqp_port, e.admin_port) for e in chosen.values()] == [(5672, 5300), (5673, 5301)]
    assert [(p.name, p.key) for p in chosen["a"].policies] == [("RootManageSharedAccessKey", "SAS_KEY_VALUE")]
    [other] = chosen["b"].policies  # namespaces never share a key: the others get one of their own
    assert other.name == "RootManageSharedAccessKey" and len(other.key) == 44
    assert (chosen["a"].amqp_option, chosen["a"].admin_option) == ("--amqp-port", "--admin-port")


def test_the_topology_wins_then_the_command_line_then_what_was_kept() -> None:
    specs = _specs({"namespaces": {
        "pinned": {"local": {"amqp_port": 6000}, "policies": {"app": {"key": "a2V5"}}},
        "kept": {}}})
    remembered = {"pinned": {"amqp_port": 1, "admin_port": 2},
                  "kept": {"amqp_port": 7000, "admin_port": 7001,
                           "policies": [{"name": "old", "key": "b2xk", "rights": ["Listen"]}]}}
    chosen = choose(specs, EMULATOR, remembered, "127.0.0.1", "t.yaml")
    assert (chosen["pinned"].amqp_port, chosen["pinned"].admin_port) == (6000, 2)
    assert chosen["pinned"].amqp_option == "local.amqp_port of namespace pinned in t.yaml"
    assert [p.name for p in chosen["pinned"].policies] == ["app"]
    assert (chosen["kept"].amqp_port, chosen["kept"].admin_port) == (7000, 7001)
    assert [(p.name, p.key) for p in chosen["kept"].policies] == [("old", "b2xk")]
    given = choose(specs, PortChoice(9000, 0, 5672, 5300), remembered, "127.0.0.1", "t.yaml")
    assert (given["kept"].amqp_port, given["kept"].admin_port) == (9001, 0)  # 0: any free port


def test_off_loopback_the_default_key_is_generated_and_kept(tmp_path) -> None:
    specs = _specs({"namespaces": {"a": {}}})
    first = choose(specs, EMULATOR, read_state(str(tmp_path)), "0.0.0.0", "t.yaml")["a"]
    [policy] = first.policies
    assert policy.key != "SAS_KEY_VALUE" and len(policy.key) == 44
    write_state(str(tmp_path), {"a": (5672, 5300, first.policies)})
    assert stat.S_IMODE((tmp_path / "broker.json").stat().st_mode) == 0o600
    again = choose(specs, EMULATOR, read_state(str(tmp_path)), "0.0.0.0", "t.yaml")["a"]
    assert (again.amqp_port, again.admin_port, again.policies) == (5672, 5300, first.policies)
