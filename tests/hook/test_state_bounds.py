"""Resource bounds of the hook's inputs: a 100 MB OCI state streamed on stdin
and an oversized config.json fail fast, with one clear line, in bounded
memory; run through the real hook (fast launcher), as a runtime would."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict

import pytest

from hookkit import install_launcher
from xpu_cdi.errors import HookError
from xpu_cdi.hook import state

MIB = 1 << 20

# A lean parent streams the input after the fork (so the child's peak RSS,
# which Linux seeds with the parent's at fork+exec, stays the hook's own) and
# reports time, exit code, stderr and the children's peak RSS.
RUNNER = textwrap.dedent("""
    import json, resource, subprocess, sys, time
    hook, total = sys.argv[1], int(sys.argv[2])
    head = b'{"ociVersion":"1.0.2","id":"big","status":"creating","pid":1,"bundle":"/nonexistent",' \\
           b'"annotations":{"a":"'
    t = time.perf_counter()
    p = subprocess.Popen([hook, "prestart"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin", "XPU_CDI_SPEC_DIRS": "/nonexistent"})
    sent = 0
    try:
        p.stdin.write(head)
        while sent < total:
            n = min(1 << 20, total - sent)
            p.stdin.write(b"x" * n)
            sent += n
        p.stdin.write(b'"}}')
        p.stdin.close()
    except BrokenPipeError:
        pass  # the hook stopped reading: what we want
    err = p.stderr.read()
    rc = p.wait()
    print(json.dumps({"rc": rc, "stderr": err.decode(errors="replace"), "sent": sent,
                      "seconds": time.perf_counter() - t,
                      "rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
""")


def run_hook_with_state(hook: Path, size: int) -> Dict[str, Any]:
    r = subprocess.run([sys.executable, "-I", "-S", "-c", RUNNER, str(hook), str(size)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def hook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_launcher(tmp_path_factory.mktemp("bounds-hook"))


def test_100mb_state_on_stdin(hook: Path) -> None:
    """A 100 MB state: exit 1 with one line naming the limit, in under 2 s and 64 MiB, after reading little of it."""
    got = run_hook_with_state(hook, 100 * MIB)
    lines = got["stderr"].strip().splitlines()
    assert got["rc"] == 1 and len(lines) == 1, got
    assert lines[0].startswith("xpu-cdi-hook: ") and f"larger than {state.MAX_STATE_BYTES} bytes" in lines[0], got
    assert got["seconds"] < 2.0, got
    assert got["rss_mib"] < 64, got
    assert got["sent"] < 100 * MIB, "the hook read the whole 100 MB before refusing it"


def test_state_just_under_the_limit_is_parsed(hook: Path) -> None:
    """The control: a state below the limit is read whole and fails later, on the missing bundle."""
    got = run_hook_with_state(hook, state.MAX_STATE_BYTES // 2)
    assert got["rc"] == 1 and "larger than" not in got["stderr"] and "/nonexistent" in got["stderr"], got


def test_oversized_config_json(tmp_path: Path) -> None:
    """A config.json over the limit is refused naming the file, without reading it all."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    with open(bundle / "config.json", "wb") as f:
        f.write(b'{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"x":"')
        f.truncate(state.MAX_CONFIG_BYTES + MIB)  # sparse
    with pytest.raises(HookError, match="larger than") as err:
        state.read_config(str(bundle))
    assert "config.json" in str(err.value) and "\n" not in str(err.value)
