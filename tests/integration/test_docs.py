"""Every code block of the README and docs/*.md, as written (tests/doc_blocks.py says how a block declares
what it needs):

* Python runs in a process of its own whose HOME holds a `sbfed broker serve` with the emulator's defaults
  (namespace, key, data in ~/.local/share/sbfed/broker), so `~/.local/...` paths and the emulator's
  connection string mean what they say. The broker takes free ports and the block's process maps the
  defaults (5672, 5300, 5671, 5443) to them (tests/doc_shim), so this runs beside anything holding those.
  A `pytest` block runs as a test file under `pytest -p sbfed.testing`; a `fragment` compiles and imports.
* Shell: each `sbfed ...` command is parsed by the real parser of its subcommand (every option and value
  argparse checks); each `make TARGET` names a target of the Makefile. A block with neither must say why.
* JSON and YAML parse; a topology among them (`namespaces` or `UserConfig`) validates as the commands
  validate it. INI parses.
* `skip` needs its reason; no block is left out silently.
"""

from __future__ import annotations

import ast
import configparser
import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import topology
from local_broker.topology import check_sql
from tests.cli_parsers import check_command
from tests.doc_blocks import ROOT, Block, blocks, documents, shell_commands

BLOCKS = [block for document in documents() for block in blocks(document)]
SHIM = Path(__file__).resolve().parents[1] / "doc_shim"
DEFAULT_PORTS = {"amqp_port": 5672, "admin_port": 5300, "amqps_port": 5671, "websocket_port": 5443}
MODES = {"", "skip", "fragment", "pytest"}
LANGUAGES = {"", "text", "python", "sh", "bash", "json", "yaml", "ini"}
RUN_SECONDS = 180


def test_every_block_says_what_it_is() -> None:
    problems = [f"{b.id}: unknown language {b.lang!r}, allowed: {sorted(LANGUAGES)}" for b in BLOCKS
                if b.lang not in LANGUAGES]
    problems += [f"{b.id}: unknown doctest mode {b.mode!r}, allowed: {sorted(MODES - {''})}" for b in BLOCKS
                 if b.mode not in MODES]
    problems += [f"{b.id}: doctest {b.mode} needs a reason (`<!-- doctest: {b.mode}: why -->`)"
                 for b in BLOCKS if b.mode in ("skip", "fragment") and len(b.reason.split()) < 3]
    problems += [f"{b.id}: doctest {b.mode} applies to Python blocks" for b in BLOCKS
                 if b.mode in ("fragment", "pytest") and b.lang != "python"]
    assert problems == []
    assert len(BLOCKS) > 50  # the walk finds the docs' blocks


@pytest.fixture(scope="module")
def emulator_home(tmp_path_factory: pytest.TempPathFactory):
    """HOME with `sbfed broker serve` (no options but free ports) running in it; the default-port map."""
    home = tmp_path_factory.mktemp("doc-home")
    ready = home / "ready.json"
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME", "REQUESTS_CA_BUNDLE")}
    env |= {"HOME": str(home), "PYTHONPATH": str(ROOT)}
    any_port = [word for kind in DEFAULT_PORTS for word in ("--" + kind.replace("_", "-"), "0")]
    command = [sys.executable, "-m", "sbfed.cli", "broker", "serve", "--ready-file", str(ready),
               "--log-level", "WARNING", *any_port]
    with (home / "broker.log").open("w") as log:
        broker = subprocess.Popen(command, env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert broker.poll() is None, (home / "broker.log").read_text()
            assert time.monotonic() < deadline, "the broker did not start"
            time.sleep(0.1)
        [namespace] = json.loads(ready.read_text())
        assert Path(namespace["cert_path"]) == home / ".local/share/sbfed/broker/broker-cert.pem"
        ports = ",".join(f"{default}={namespace[kind]}" for kind, default in DEFAULT_PORTS.items())
        yield home, {**env, "PYTHONPATH": f"{SHIM}{os.pathsep}{ROOT}", "SBFED_DOCTEST_PORTS": ports}
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(30)


def _ids(kind: str) -> list[Block]:
    return [pytest.param(b, id=b.id) for b in BLOCKS if _kind(b) == kind]


def _kind(block: Block) -> str:
    if block.mode:
        return block.mode
    return {"sh": "shell", "bash": "shell", "": "text"}.get(block.lang, block.lang)


@pytest.mark.parametrize("block", _ids("python"))
def test_python_runs_as_written(block: Block, emulator_home, tmp_path: Path) -> None:
    home, env = emulator_home
    script = tmp_path / "block.py"
    script.write_text(block.text)
    run = subprocess.run([sys.executable, str(script)], cwd=home, env=env, capture_output=True, text=True,
                         timeout=RUN_SECONDS, check=False)
    assert run.returncode == 0, f"{block.id}:\n{run.stdout}{run.stderr}"


@pytest.mark.parametrize("block", _ids("pytest"))
def test_a_pytest_block_passes_under_the_plugin(block: Block, tmp_path: Path) -> None:
    (tmp_path / "test_block.py").write_text(block.text)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "sbfed.testing", "-q", "-p",
                          "no:cacheprovider", "test_block.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=RUN_SECONDS, check=False)
    assert run.returncode == 0 and " passed" in run.stdout, f"{block.id}:\n{run.stdout}{run.stderr}"


@pytest.mark.parametrize("block", _ids("fragment"))
def test_a_fragment_compiles_and_its_imports_resolve(block: Block) -> None:
    tree = ast.parse(block.text, filename=block.id)
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert imports or tree.body, block.id
    exec(compile(ast.Module(body=imports, type_ignores=[]), block.id, "exec"), {})


MAKE_TARGETS = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))


@pytest.mark.parametrize("block", _ids("shell"))
def test_shell_commands_parse(block: Block) -> None:
    checked, problems = 0, []
    for words in shell_commands(block.text):
        program = Path(words[0]).name
        if program == "sbfed":
            checked += 1
            problems += _parse_problems(words)
        elif program == "make":
            checked += 1
            problems += [f"make {t}: no such target" for t in words[1:] if t not in MAKE_TARGETS]
    assert problems == [], block.id
    assert checked, f"{block.id}: no sbfed or make command to check; mark it <!-- doctest: skip: why -->"


def _parse_problems(words: list[str]) -> list[str]:
    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
        try:
            check_command(words[1:])
        except SystemExit as exit:
            if exit.code:
                return [f"{' '.join(words)}: {said.getvalue().strip().splitlines()[-1:]}"]
    return []


@pytest.mark.parametrize("block", _ids("json") + _ids("yaml"))
def test_data_parses_and_topologies_validate(block: Block) -> None:
    document = json.loads(block.text) if block.lang == "json" else yaml.safe_load(block.text)
    assert document is not None, block.id
    if isinstance(document, dict) and ({"namespaces", "UserConfig"} & set(document)):
        topology.add_check(check_sql)
        topology.parse(document, block.id)


@pytest.mark.parametrize("block", _ids("ini"))
def test_ini_parses(block: Block) -> None:
    parser = configparser.ConfigParser()
    parser.read_string(block.text, source=block.id)
    assert parser.sections(), block.id


@pytest.mark.parametrize("block", _ids("skip"))
def test_a_skipped_block_says_why(block: Block) -> None:
    assert len(block.reason.split()) >= 3, f"{block.id}: say why it cannot run here"
