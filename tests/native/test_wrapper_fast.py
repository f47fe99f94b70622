"""xpu-container-runtime's compiled front end, end to end, with a fake runtime.

The built binary runs on a bundle; the "real runtime" is a script that
records its argv, environment, stdin and the config.json it sees.  No
container is made.  Cases run the binary alone (``front_only``: nothing
beside it) and, where the tooling's Python wrapper code is the reference
for a result or a message, compare with it.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from xpu_cdi.generate import spec as spec_writer

from wrapper_specs import spec
from xpu_cdi.runtime import launcher, wrapper

KIND = "kunlunxin.com/xpu"
FAKE_RUNTIME = """#!/bin/sh
printf '%s\\n' "$0" "$@" > "$RECORD/argv"
printf '%s' "${XPU_CDI_WRAPPER_ACTIVE-unset}" > "$RECORD/active"
cat > "$RECORD/stdin"
cp "$BUNDLE/config.json" "$RECORD/config.json" 2>/dev/null
exit 0
"""


def index(cards: int) -> Dict[str, Any]:
    return {"xpuCdiIndex": 1, "kind": KIND, "profile": "kunlunxin",
            "selection": {"env": ["CXPU_VISIBLE_DEVICES", "CXPU_VISIBLE_DEVICES"], "aliases": None,
                          "none": ["", "void", "none"]},
            "indices": {str(i): str(i) for i in range(cards)}, "all": None, "spec": "kunlunxin.com-xpu.json",
            "knownSelection": spec_writer.known_selection()}


@pytest.fixture(scope="module")
def binary(fast_bin: Path) -> Path:
    exe = fast_bin / "xpu-container-runtime"
    assert exe.exists(), f"{exe} is not built (build.py --out DIR xpu-container-runtime; XPU_CDI_FAST_BIN=DIR)"
    return exe


@pytest.fixture(scope="module")
def pair(binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The front end and its Python half, as `xpu-cdi runtime install-launcher` installs them."""
    path = tmp_path_factory.mktemp("pair") / "xpu-container-runtime"
    launcher.install(str(path), str(binary))
    return path


@pytest.fixture(scope="module")
def front_only(binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("front-only") / "xpu-container-runtime"
    path.write_bytes(binary.read_bytes())
    path.chmod(0o755)
    return path


class Box:
    """A bundle, a spec dir and a recording fake runtime."""

    def __init__(self, tmp: Path, cards: int = 8) -> None:
        self.tmp = tmp
        self.record = tmp / "record"
        self.record.mkdir()
        self.fake = tmp / "fake-runc"
        self.fake.write_text(FAKE_RUNTIME)
        self.fake.chmod(0o755)
        self.bundle = tmp / "bundle"
        self.bundle.mkdir()
        self.spec_dir = tmp / "cdi"
        self.spec_dir.mkdir()
        (self.spec_dir / "kunlunxin.com-xpu.json").write_text(json.dumps(spec(cards)))
        (self.spec_dir / "kunlunxin.com-xpu.json.xpu-cdi").write_text(json.dumps(index(cards)))
        self.env = {"PATH": "/usr/bin:/bin", "XPU_CDI_RUNTIME": str(self.fake), "RECORD": str(self.record),
                    "BUNDLE": str(self.bundle), "XPU_CDI_SPEC_DIRS": str(self.spec_dir)}

    def config(self, env: List[str], annotations: Optional[Dict[str, str]] = None, **extra: Any) -> bytes:
        cfg = {"ociVersion": "1.0.2", "process": {"terminal": False, "user": {"uid": 0, "gid": 0},
                                                  "env": ["PATH=/usr/bin:/bin", "TERM=xterm", *env],
                                                  "args": ["sh"], "cwd": "/"},
               "root": {"path": "rootfs"}, "hostname": "c", "annotations": annotations or {},
               "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                          {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid"]}],
               "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]},
                         "namespaces": [{"type": "pid"}, {"type": "mount"}]}, **extra}
        text = json.dumps(cfg, indent="\t").encode()  # not compact, like Go's encoder output is not ours
        (self.bundle / "config.json").write_bytes(text)
        (self.bundle / "config.json").chmod(0o640)
        return text

    def run(self, exe: Path, *args: str, env: Optional[Dict[str, str]] = None, stdin: bytes = b"",
            cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
        for p in self.record.iterdir():
            p.unlink()
        return subprocess.run([str(exe), *args], env=env or self.env, input=stdin, capture_output=True,
                              timeout=60, cwd=cwd)

    def ran(self) -> bool:
        return (self.record / "argv").exists()

    def argv(self) -> List[str]:
        return (self.record / "argv").read_text().splitlines()

    def seen_config(self) -> bytes:
        return (self.record / "config.json").read_bytes()

    def python_prepared(self, text: bytes) -> Any:
        """config.json as the Python wrapper writes it (wrapper.prepare on a copy)."""
        copy = self.tmp / "py-bundle"
        copy.mkdir(exist_ok=True)
        (copy / "config.json").write_bytes(text)
        wrapper.prepare(str(copy), {"XPU_CDI_SPEC_DIRS": str(self.spec_dir)})
        return json.loads((copy / "config.json").read_text())


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def test_nothing_asked_leaves_config_alone(box: Box, front_only: Path) -> None:
    """The common case, answered by C: config.json untouched byte for byte (same
    file, same mtime), the runtime exec'd with the arguments and stdin as given."""
    text = box.config(["CXPU_VISIBLE_DEVICES=void"])
    before = os.stat(box.bundle / "config.json")
    args = ["--root", "/run/r", "--log", str(box.tmp / "log"), "create", "--bundle", str(box.bundle), "c1"]
    r = box.run(front_only, *args, stdin=b"terminal bytes")
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert box.argv() == [str(box.fake), *args]
    assert (box.record / "active").read_text() == "1"
    assert (box.record / "stdin").read_bytes() == b"terminal bytes"
    assert (box.bundle / "config.json").read_bytes() == text == box.seen_config()
    after = os.stat(box.bundle / "config.json")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize("command", ["create", "run"])
def test_eight_cards_as_python_writes_them(box: Box, front_only: Path, command: str) -> None:
    """8 cards asked (env and annotation): C edits config.json itself, to what the
    Python wrapper writes; mode kept, no temp file left, stdin untouched."""
    text = box.config(["CXPU_VISIBLE_DEVICES=0-5", "LD_LIBRARY_PATH=/app/lib"],
                      {"cdi.k8s.io/more": f"{KIND}=6,{KIND}=7"})
    want = box.python_prepared(text)
    r = box.run(front_only, command, "-b", str(box.bundle), "c1", stdin=b"in")
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert box.argv() == [str(box.fake), command, "-b", str(box.bundle), "c1"]
    got = json.loads(box.seen_config())
    assert got == want
    assert [d["path"] for d in got["linux"]["devices"]] == ["/dev/xpuctrl", *(f"/dev/xpu{i}" for i in range(8))]
    assert stat.S_IMODE(os.stat(box.bundle / "config.json").st_mode) == 0o640
    assert sorted(p.name for p in box.bundle.iterdir()) == ["config.json"]
    assert (box.record / "stdin").read_bytes() == b"in"
    # a retried create changes nothing
    once = (box.bundle / "config.json").read_bytes()
    r = box.run(front_only, command, "-b", str(box.bundle), "c1")
    assert r.returncode == 0 and (box.bundle / "config.json").read_bytes() == once


def test_bundle_defaults_to_the_cwd(box: Box, front_only: Path) -> None:
    text = box.config(["CXPU_VISIBLE_DEVICES=3"])
    want = box.python_prepared(text)
    r = box.run(front_only, "--debug", "run", "--bundle=", "c1", cwd=box.bundle)
    assert r.returncode == 0, r.stderr
    assert json.loads(box.seen_config()) == want


def python_wrapper(box: Box, *args: str) -> subprocess.CompletedProcess:
    """The Python wrapper alone (as before the front end existed)."""
    for p in box.record.iterdir():
        p.unlink()
    return subprocess.run([sys.executable, "-c", "import sys; from xpu_cdi.runtime.wrapper import main; "
                           "sys.exit(main())", *args], env=box.env, input="", capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("env", [["CXPU_VISIBLE_DEVICES=9"], ["CXPU_VISIBLE_DEVICES=0,x"],
                                 ["ASCEND_VISIBLE_DEVICES=0"]])
def test_bad_request_is_python_s_error_and_no_exec(box: Box, pair: Path, front_only: Path, env: List[str]) -> None:
    """The binary alone prints the one-line error the tooling's wrapper code words the same way
    (also into --log) and does not run the runtime; config.json stays as it was."""
    text = box.config(env)
    log = box.tmp / "runc.log"
    args = ["--log", str(log), "create", "--bundle", str(box.bundle), "c1"]
    want = python_wrapper(box, *args)
    assert want.returncode == 1 and not box.ran()
    log.unlink()
    r = box.run(pair, *args)
    assert r.returncode == 1 and not box.ran()
    assert r.stderr.decode() == want.stderr and want.stderr.startswith("xpu-container-runtime: ")
    assert want.stderr.strip() in log.read_text()
    assert (box.bundle / "config.json").read_bytes() == text
    log.unlink()
    r = box.run(front_only, *args)
    assert r.returncode == 1 and r.stderr.decode() == want.stderr and not box.ran()
    assert want.stderr.strip() in log.read_text()


def test_loop_guard(box: Box, pair: Path, front_only: Path) -> None:
    """Started with XPU_CDI_WRAPPER_ACTIVE set: refused in one line, nothing is exec'd."""
    box.config([])
    env = dict(box.env, XPU_CDI_WRAPPER_ACTIVE="1")
    r = box.run(pair, "state", "c1", env=env)
    assert r.returncode == 1 and b"started by itself" in r.stderr and not box.ran()
    r = box.run(front_only, "state", "c1", env=env)
    assert r.returncode == 1 and r.stderr.decode() == (
        "xpu-container-runtime: started by itself (XPU_CDI_RUNTIME or PATH names another copy of the wrapper as "
        "the real runtime): point XPU_CDI_RUNTIME at runc or crun\n") and not box.ran()
    r = box.run(front_only, "state", "c1", env=dict(box.env, XPU_CDI_WRAPPER_ACTIVE=""))
    assert r.returncode == 0 and box.ran(), r.stderr  # empty is unset, as os.environ.get sees it


def test_a_copy_of_itself_as_runtime_ends_in_one_error(box: Box, pair: Path, tmp_path: Path) -> None:
    """A "runc" that runs the wrapper again is caught by the guard, not an exec loop."""
    (tmp_path / "loop").mkdir()
    copy = tmp_path / "loop" / "runc"
    copy.write_text(f"#!/bin/sh\nexec {pair} \"$@\"\n")
    copy.chmod(0o755)
    env = dict(box.env, PATH=f"{copy.parent}:/usr/bin:/bin")
    del env["XPU_CDI_RUNTIME"]
    r = box.run(pair, "state", "x", env=env)
    assert r.returncode == 1 and b"started by itself" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [["state", "c1"], ["start", "c1"], ["kill", "c1", "KILL"], ["delete", "-f", "c1"],
                                  ["--version"], ["--root", "/r", "--log-format", "json", "ps", "c1"], [],
                                  ["--", "state", "c1"], ["--log", "create", "state"]])
def test_pass_through(box: Box, front_only: Path, args: List[str]) -> None:
    """Every other command goes straight to the runtime: C alone, argv as given."""
    r = box.run(front_only, *args, stdin=b"x")
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert box.argv() == [str(box.fake), *args]
    assert (box.record / "active").read_text() == "1"
    assert (box.record / "stdin").read_bytes() == b"x"


def test_runtime_from_path_skips_copies_of_the_wrapper(box: Box, front_only: Path, tmp_path: Path) -> None:
    """No XPU_CDI_RUNTIME: runc on PATH, passing over a 'runc' that is the wrapper itself."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    os.symlink(front_only, a / "runc")
    os.symlink(box.fake, b / "runc")
    env = dict(box.env, PATH=f"{a}:{b}")
    del env["XPU_CDI_RUNTIME"]
    r = box.run(front_only, "state", "c1", env=env)
    assert r.returncode == 0, r.stderr
    assert box.argv() == [str(b / "runc"), "state", "c1"]


def test_no_runtime_is_python_s_error(box: Box, pair: Path, tmp_path: Path) -> None:
    env = dict(box.env, PATH=str(tmp_path / "empty"))
    del env["XPU_CDI_RUNTIME"]
    r = box.run(pair, "state", "c1", env=env)
    assert r.returncode == 1 and b"no 'runc' found on PATH" in r.stderr, r.stderr


def test_exec_failure_goes_to_python(box: Box, pair: Path, tmp_path: Path) -> None:
    """A runtime that cannot be exec'd (bad interpreter): Python says so."""
    bad = tmp_path / "bad-runc"
    bad.write_text("#!/nonexistent/interpreter\n")
    bad.chmod(0o755)
    r = box.run(pair, "state", "c1", env=dict(box.env, XPU_CDI_RUNTIME=str(bad)))
    assert r.returncode == 1 and b"cannot execute" in r.stderr, r.stderr


@pytest.mark.parametrize("why, extra_edits, config_extra, message", [
    ("an edit the wrapper does not apply", {"intelRdt": {"closID": "x"}}, {},
     "a requested CDI device needs 'intelRdt', which xpu-container-runtime does not apply: use a CDI-enabled runtime "
     "for it"),
    ("a lone surrogate in config.json", {}, {"hostname": "\ud800"}, "is not valid JSON: "),
])
def test_refused_cases_leave_the_config(box: Box, front_only: Path, why: str, extra_edits: Dict[str, Any],
                                        config_extra: Dict[str, Any], message: str) -> None:
    """What the wrapper does not do is refused in one line; config.json is left as it was, no runtime runs."""
    s = spec(8)
    s["containerEdits"].update(extra_edits)
    (box.spec_dir / "kunlunxin.com-xpu.json").write_text(json.dumps(s))
    text = box.config(["CXPU_VISIBLE_DEVICES=1"], **config_extra)
    r = box.run(front_only, "create", "--bundle", str(box.bundle), "c1")
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and message in err and not box.ran(), (why, err)
    assert (box.bundle / "config.json").read_bytes() == text
