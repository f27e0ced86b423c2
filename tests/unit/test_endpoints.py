"""Which ports and keys each namespace gets: the topology's, the command line's, what the data directory
remembers, then the emulator's defaults; and what is remembered."""

from __future__ import annotations

import stat

from local_broker.endpoints import DEFAULT_PORTS, PortChoice, choose, read_state, write_state
from topology import parse

EMULATOR = PortChoice({}, DEFAULT_PORTS)


def _specs(document: dict) -> list:
    return list(parse(document).namespaces.values())


def test_defaults_are_the_emulators_and_go_up_by_one_per_namespace() -> None:
    chosen = choose(_specs({"namespaces": {"a": {}, "b": {}}}), EMULATOR, {}, "127.0.0.1", "t.yaml")
    assert [e.ports for e in chosen.values()] == [  # AMQPS goes down, clear of the AMQP ports
        {"amqp_port": 5672, "admin_port": 5300, "amqps_port": 5671, "websocket_port": 5443},
        {"amqp_port": 5673, "admin_port": 5301, "amqps_port": 5670, "websocket_port": 5444}]
    assert [(p.name, p.key) for p in chosen["a"].policies] == [("RootManageSharedAccessKey", "SAS_KEY_VALUE")]
    [other] = chosen["b"].policies  # namespaces never share a key: the others get one of their own
    assert other.name == "RootManageSharedAccessKey" and len(other.key) == 44
    assert chosen["a"].options == {"amqp_port": "--amqp-port", "admin_port": "--admin-port",
                                   "amqps_port": "--amqps-port", "websocket_port": "--websocket-port"}


def test_the_topology_wins_then_the_command_line_then_what_was_kept() -> None:
    specs = _specs({"namespaces": {
        "pinned": {"local": {"amqp_port": 6000, "amqps_port": 6001}, "policies": {"app": {"key": "a2V5"}}},
        "kept": {}}})
    remembered = {"pinned": {"amqp_port": 1, "admin_port": 2},
                  "kept": {"amqp_port": 7000, "admin_port": 7001,
                           "policies": [{"name": "old", "key": "b2xk", "rights": ["Listen"]}]}}
    chosen = choose(specs, EMULATOR, remembered, "127.0.0.1", "t.yaml")
    assert chosen["pinned"].ports == {"amqp_port": 6000, "admin_port": 2, "amqps_port": 6001,
                                      "websocket_port": 0}  # the AMQP port is fixed: not Service Bus's
    assert chosen["pinned"].options["amqps_port"] == "local.amqps_port of namespace pinned in t.yaml"
    assert [p.name for p in chosen["pinned"].policies] == ["app"]
    assert (chosen["kept"].ports["amqp_port"], chosen["kept"].ports["admin_port"]) == (7000, 7001)
    assert [(p.name, p.key) for p in chosen["kept"].policies] == [("old", "b2xk")]
    given = choose(specs, PortChoice({"amqp_port": 9000, "admin_port": 0, "amqps_port": 8000}, DEFAULT_PORTS),
                   remembered, "127.0.0.1", "t.yaml")
    assert given["kept"].ports == {"amqp_port": 9001, "admin_port": 0, "amqps_port": 7999,  # 0: any free port
                                   "websocket_port": 0}


def test_off_loopback_the_default_key_is_generated_and_kept(tmp_path) -> None:
    specs = _specs({"namespaces": {"a": {}}})
    first = choose(specs, EMULATOR, read_state(str(tmp_path)), "0.0.0.0", "t.yaml")["a"]
    [policy] = first.policies
    assert policy.key != "SAS_KEY_VALUE" and len(policy.key) == 44
    write_state(str(tmp_path), {"a": ({"amqp_port": 5672, "admin_port": 5300, "amqps_port": 6671,
                                       "websocket_port": 6443}, first.policies)})
    assert stat.S_IMODE((tmp_path / "broker.json").stat().st_mode) == 0o600
    again = choose(specs, EMULATOR, read_state(str(tmp_path)), "0.0.0.0", "t.yaml")["a"]
    assert again.ports == {"amqp_port": 5672, "admin_port": 5300, "amqps_port": 6671, "websocket_port": 6443}
    assert again.policies == first.policies


def test_a_namespace_on_any_free_amqp_port_gets_any_free_tls_ports_unless_set() -> None:
    specs = _specs({"namespaces": {"free": {"local": {"amqp_port": 0}},
                                   "pinned": {"local": {"amqp_port": 0, "websocket_port": 7443}}}})
    remembered = {"free": {"amqps_port": 6671}}
    chosen = choose(specs, EMULATOR, remembered, "127.0.0.1", "t.yaml")
    assert [(e.ports["amqps_port"], e.ports["websocket_port"]) for e in chosen.values()] == \
        [(0, 0), (0, 7443)]
    given = choose(specs, PortChoice({"amqps_port": 6000}, DEFAULT_PORTS), {}, "127.0.0.1", "t.yaml")
    assert given["free"].ports["amqps_port"] == 6000


def test_a_fixed_amqp_port_takes_tls_ports_that_cannot_collide_unless_set_or_kept() -> None:
    """Two brokers whose topologies each fix AMQP and admin ports must not both ask for 5671 and 5443; a TLS
    port the data directory kept from the last start is reused (it was free for this broker)."""
    specs = _specs({"namespaces": {"a": {"local": {"amqp_port": 6100, "admin_port": 6200}}}})
    chosen = choose(specs, EMULATOR, {}, "127.0.0.1", "t.yaml")["a"]
    assert chosen.ports == {"amqp_port": 6100, "admin_port": 6200, "amqps_port": 0, "websocket_port": 0}
    remembered = {"a": {"amqps_port": 40001, "websocket_port": 40002}}
    kept = choose(specs, EMULATOR, remembered, "127.0.0.1", "t.yaml")
    assert (kept["a"].ports["amqps_port"], kept["a"].ports["websocket_port"]) == (40001, 40002)
    from_command_line = choose(_specs({"namespaces": {"a": {}}}),
                               PortChoice({"amqp_port": 6100}, DEFAULT_PORTS), {}, "127.0.0.1", "t.yaml")["a"]
    assert (from_command_line.ports["amqps_port"], from_command_line.ports["websocket_port"]) == (0, 0)
    set_too = choose(_specs({"namespaces": {"a": {"local": {"amqp_port": 6100, "amqps_port": 6101}}}}),
                     PortChoice({"websocket_port": 6443}, DEFAULT_PORTS), {}, "127.0.0.1", "t.yaml")["a"]
    assert (set_too.ports["amqps_port"], set_too.ports["websocket_port"]) == (6101, 6443)
