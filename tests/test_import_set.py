"""What each command and daemon imports (issue 30): the heavy libraries stay with the
processes that use them.  A deterministic stand-in for a timing: each case runs in a
fresh interpreter and reads its ``sys.modules`` at exit."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import List, Set

import pytest

from support import fakehost

# what no CLI command but its own needs: the daemons' stacks, validation, the doctor's readers
DAEMON_STACKS = {"grpc", "google.protobuf", "kubernetes", "urllib3", "prometheus_client", "asyncio", "ssl"}
CLI_HEAVY = DAEMON_STACKS | {"jsonschema", "pyudev", "tomlkit", "importlib.resources", "zipfile", "tempfile"}

_PROBE = """
import atexit, json, sys
_out = sys.argv.pop(1)
atexit.register(lambda: json.dump(sorted(sys.modules), open(_out, "w")))
{body}
"""


def modules_after(tmp_path: Path, body: str, *argv: str) -> Set[str]:
    """The modules loaded by *body* (Python code) run with *argv* as sys.argv[2:]."""
    out = tmp_path / f"modules-{len(list(tmp_path.iterdir()))}.json"
    r = subprocess.run([sys.executable, "-c", _PROBE.format(body=body), str(out), *argv], capture_output=True,
                       text=True, timeout=120)
    assert out.exists(), f"the probe wrote no module list (exit {r.returncode}): {r.stderr[-2000:]}"
    return set(json.loads(out.read_text()))


def cli_modules(tmp_path: Path, *argv: str) -> Set[str]:
    return modules_after(tmp_path, "sys.argv[0] = 'xpu-cdi'\nfrom xpu_cdi.cli import main\nmain()", *argv)


def loaded(mods: Set[str], names: Set[str]) -> List[str]:
    """Which of *names* (a package stands for its submodules too) are among *mods*."""
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in mods))


@pytest.fixture()
def host(tmp_path: Path) -> fakehost.FakeHost:
    return fakehost.kunlunxin(tmp_path / "host", cards=8)


def test_generate_imports_no_daemon_stack(tmp_path: Path, host: fakehost.FakeHost) -> None:
    spec_dir = tmp_path / "cdi"
    mods = cli_modules(tmp_path, "generate", *host.cli_roots, "--profile", "kunlunxin", "--spec-dir", str(spec_dir))
    assert (spec_dir / "kunlunxin.com-xpu.json").exists(), "generate did not write its spec"
    assert "xpu_cdi.generate.spec" in mods  # the probe saw the command run
    assert loaded(mods, CLI_HEAVY) == []
    # the built-in profiles come from profiles/builtin.json; the daemons' logging is not generate's;
    # its option and root records are named tuples (a frozen dataclass compiles six methods at import)
    assert loaded(mods, {"yaml", "logging", "xpu_cdi.log", "dataclasses"}) == []


def test_list_imports_neither_yaml_nor_the_generate_pipeline(tmp_path: Path, host: fakehost.FakeHost) -> None:
    spec_dir = tmp_path / "cdi"
    cli_modules(tmp_path, "generate", *host.cli_roots, "--profile", "kunlunxin", "--spec-dir", str(spec_dir))
    mods = cli_modules(tmp_path, "list", "--spec-dir", str(spec_dir))
    assert "xpu_cdi.cdi.registry" in mods
    assert loaded(mods, CLI_HEAVY | {"yaml", "xpu_cdi.generate", "xpu_cdi.model"}) == []
    assert loaded(mods, {"logging", "xpu_cdi.log", "xpu_cdi.nodeconfig", "dataclasses"}) == []


@pytest.mark.parametrize("daemon, theirs", [
    ("deviceplugin", {"grpc", "google.protobuf"}),
    ("exporter", {"google.protobuf", "prometheus_client"}),  # gRPC itself when kubelet's socket is there
    ("dra", {"grpc", "google.protobuf"}),
])
def test_a_daemon_imports_only_its_own_stack(tmp_path: Path, daemon: str, theirs: Set[str]) -> None:
    """The daemon's modules as its command loads them: not another daemon's stack, nor validation."""
    mods = modules_after(tmp_path, f"import xpu_cdi.{daemon}.command, xpu_cdi.{daemon}.daemon")
    assert set(loaded(mods, theirs)) == theirs
    assert loaded(mods, (DAEMON_STACKS - theirs - {"asyncio", "ssl", "urllib3"}) | {"jsonschema"}) == []
    # the partition templates come from JSON (PyYAML ~1.1 MiB), which only the DRA driver's reader of
    # a kubeconfig file imports
    assert loaded(mods, {"yaml"}) == []
    # archives and temporary files: the DRA driver's kubeconfig with inline certificates only (and
    # the exporter's prometheus_client, which imports them); fractions: Ascend's templates only
    files = {"shutil", "tempfile", "bz2", "lzma"} if daemon != "exporter" else set()
    assert loaded(mods, {"fractions"} | files) == []
    if daemon == "exporter":  # not the DRA driver's slice builder, nor bcrypt before a web config asks
        assert loaded(mods, {"xpu_cdi.dra.slices", "bcrypt"}) == []


def test_no_module_blocks_imports() -> None:
    """Issue 41: no daemon hides modules from imports (``sys.modules[name] = None``) to keep a
    library out of its memory; each imports what its libraries ask for."""
    src = Path(__file__).resolve().parents[1] / "src" / "xpu_cdi"
    found = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Subscript) and ast.unparse(t.value) == "sys.modules" for t in node.targets):
                found.append(f"{path.relative_to(src)}:{node.lineno}")
    assert found == []
