"""node/fresh.py: a daemon replaces its command-line process with a fresh interpreter that holds
only what serving needs (issue 30) -- same pid, same descriptors, settings intact, errors worded
and mapped as the command line does, never the working directory's modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

TESTS = Path(__file__).resolve().parent

# the command line's half: click loaded (as every command has it), then the exec
_PARENT = """
import json, os, sys
import click
from xpu_cdi.node import fresh
from support.freshprobe import Settings
out, fail = sys.argv[1], sys.argv[2]
print(json.dumps({"pid": os.getpid()}), flush=True)
fresh.replace_with("support.freshprobe:serve", "xpu-cdi probe", out=out,
                   settings=Settings("kept", ("/a", "/b c")), fail=fail, code=7)
"""


Probe = Tuple["subprocess.CompletedProcess[str]", Dict[str, Any]]


def run_probe(tmp_path: Path, fail: str = "", flags: Tuple[str, ...] = ()) -> Probe:
    out = tmp_path / "state.json"
    (tmp_path / "freshprobe_cwd.py").write_text("")  # in the working directory: the child must not import it
    paths = [str(TESTS), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]  # no "": that is cwd
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    r = subprocess.run([sys.executable, *flags, "-c", _PARENT, str(out), fail], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    state = json.loads(out.read_text()) if out.exists() else {}
    return r, state


def test_the_new_interpreter_is_the_same_process_without_click(tmp_path: Path) -> None:
    r, state = run_probe(tmp_path)
    assert r.returncode == 7, r.stderr  # serve's result is the exit code
    assert state["pid"] == json.loads(r.stdout.splitlines()[0])["pid"]
    assert "click" not in state["modules"] and "support.freshprobe" in state["modules"]
    assert state["settings"] == ["kept", ["/a", "/b c"]]
    assert state["argv"] == ["xpu-cdi", "probe"] and state["comm"] == "xpu-cdi"
    assert state["cwd_module"] is False  # `-c` put the working directory first on sys.path: taken off
    assert [f for f in state["fds"] if "xpu-cdi-settings" in f] == []  # the settings' memfd, closed once read


def test_an_error_while_serving_is_one_line_and_its_exit_code(tmp_path: Path) -> None:
    r, _state = run_probe(tmp_path, fail="SpecError")
    assert r.returncode == 5  # errors.EXIT_CODES, as the command line maps it
    assert r.stderr.strip().splitlines() == ["xpu-cdi: the probe was asked to fail with SpecError"]
    r, _state = run_probe(tmp_path, fail="ConfigError")
    assert r.returncode == 1 and r.stderr.strip() == "xpu-cdi: the probe was asked to fail with ConfigError"


def test_the_interpreter_options_are_kept(tmp_path: Path) -> None:
    r, state = run_probe(tmp_path, flags=("-s", "-X", "dev"))
    assert r.returncode == 7, r.stderr
    assert state["no_user_site"] == 1 and state["xoptions"] == {"dev": True}


def test_an_interpreter_that_cannot_start_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing replaced, nothing left open: the command line says why in its one line."""
    from xpu_cdi.errors import ConfigError
    from xpu_cdi.node import fresh

    before = sorted(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
    with pytest.raises(ConfigError, match="cannot start /nonexistent/python3 for xpu-cdi probe: .*No such file"):
        fresh.replace_with("support.freshprobe:serve", "xpu-cdi probe", out="unused")
    assert sorted(os.listdir("/proc/self/fd")) == before
