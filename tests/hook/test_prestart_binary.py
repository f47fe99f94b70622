"""`xpu-cdi-hook prestart` and `xpu-container-runtime`, the compiled binaries
alone, black-box: every bad input is answered by the binary itself in one
line (what is wrong, what to do), exit 1, nothing created or mounted; a
broken spec file beside a good one is a warning and the good one still
serves; and both run a real `runc run` with an empty PATH, no interpreter
reachable and nothing beside them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from support import fakehost
from support import runtimes
from support.hookkit import HookHost, container_output, hook_binary, host_mounts, tree
from xpu_cdi._version import VERSION

pytestmark = pytest.mark.privileged  # fake hosts have device nodes

HOOK = "xpu-cdi-hook"
WRAPPER = "xpu-container-runtime"
KIND = "kunlunxin.com/xpu"


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dir holding the two binaries and nothing else (no .py beside them)."""
    d = tmp_path_factory.mktemp("alone")
    d.chmod(0o755)
    for name in (HOOK, WRAPPER):
        shutil.copy(hook_binary(name), d / name)
        (d / name).chmod(0o755)
    return d


@pytest.fixture(scope="module")
def host(alone: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HookHost]:
    base = tmp_path_factory.mktemp("prestart-binary")
    base.chmod(0o755)
    h = HookHost(base / "xpu", alone / HOOK, "kunlunxin", 8)
    yield h
    fakehost.remove_tree(h.base)


def bundle_dir(base: Path, config: Any) -> Path:
    """A bundle with an empty rootfs and *config* (a dict, or raw text/bytes) as config.json."""
    b = base / "bundle"
    (b / "rootfs").mkdir(parents=True, exist_ok=True)
    if config is not None:
        data = config if isinstance(config, bytes) else (config if isinstance(config, str) else json.dumps(config))
        (b / "config.json").write_bytes(data.encode() if isinstance(data, str) else data)
    return b


def asks(env: List[str], **extra: Any) -> Dict[str, Any]:
    return {"root": {"path": "rootfs"}, "process": {"env": env}, **extra}


def state_of(b: Path, **extra: Any) -> Dict[str, Any]:
    return {"ociVersion": "1.0.2", "id": "c1", "pid": 0, "bundle": str(b), **extra}


def hook(host: HookHost, data: Any, log: Path, spec_dir: Optional[Path] = None) -> subprocess.CompletedProcess:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return subprocess.run([str(host.hook), "prestart", "--log", str(log)], input=raw, capture_output=True,
                          timeout=30, env={"PATH": "", "XPU_CDI_SPEC_DIRS": str(spec_dir or host.spec_dir)})


def log_lines(log: Path) -> List[str]:
    if not log.exists():
        return []
    return [line.split(": ", 1)[1] for line in log.read_text().splitlines()]


def refused(host: HookHost, tmp_path: Path, data: Any, message: str, spec_dir: Optional[Path] = None) -> None:
    """The hook says *message* in one line on stderr and in its log, exits 1 and touches nothing."""
    before, mounts = tree(tmp_path), host_mounts(str(tmp_path))
    log = tmp_path.parent / f"{tmp_path.name}.log"
    r = hook(host, data, log, spec_dir)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (1, b"", f"{HOOK}: {message}\n")
    assert log_lines(log) == [f"error: {message}"]
    assert tree(tmp_path) == before and host_mounts(str(tmp_path)) == mounts


MAX_STATE = 1 << 20
MAX_CONFIG = 4 << 20


class TestState:
    @pytest.mark.parametrize("raw, message", [
        (b"", "no OCI state on stdin: the hook must be run by a container runtime (as an OCI hook), not by hand"),
        (b'{"id": "c1", "pid": 0, "bund',
         "OCI state on stdin is not valid JSON (premature EOF at line 1, column 29 (byte 28)): is the runtime OCI "
         "compliant?"),
        (b'["c1"]', "OCI state on stdin must be a JSON object, got a list"),
        (b'{"id": "c1", "bundle": "b"}', "OCI state of 'c1': 'bundle' must be an absolute path, got 'b'"),
        (b'{"id": "c1", "bundle": "/b", "pid": -1}',
         "OCI state of 'c1': 'pid' must be a non-negative integer, got -1"),
        (b" " * (MAX_STATE + 1), f"the OCI state on stdin is larger than {MAX_STATE} bytes: refusing to parse it"),
    ], ids=["empty", "truncated", "list", "relative-bundle", "negative-pid", "oversized"])
    def test_bad_state(self, host: HookHost, tmp_path: Path, raw: bytes, message: str) -> None:
        refused(host, tmp_path, raw, message)

    def test_missing_bundle(self, host: HookHost, tmp_path: Path) -> None:
        refused(host, tmp_path, state_of(tmp_path / "gone"),
                f"bundle '{tmp_path}/gone': cannot open config.json: No such file or directory")


class TestConfig:
    @pytest.mark.parametrize("config, message", [
        ("{", "is not valid JSON: premature EOF at line 1, column 2 (byte 1)"),
        ('{"root": {"path": "rootfs"}, "process": {"env": ["CXPU_VIS',
         "is not valid JSON: premature EOF at line 1, column 59 (byte 58)"),
        ('{"root": {"path": "rootfs"}, "root": {}}',
         'is not valid JSON: duplicate key "root" at line 1, column 36 (byte 35)'),
        ("[]", "must hold a JSON object, got a list"),
        ({"process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}}, "has no root.path: cannot find the container's rootfs"),
        (b" " * (MAX_CONFIG + 1), f"is larger than {MAX_CONFIG} bytes: refusing to parse it"),
        ('{"root": {"path": "rootfs"}, "a": ' + "[" * 200 + "]" * 200 + "}",
         "is not valid JSON: nested deeper than 100 levels at line 1, column 135 (byte 134)"),
        ('{"root": {"path": "rootfs"}, "n": 123456789012345678901234567890}',
         "is not valid JSON: an integer out of the 64-bit range at line 1, column 65 (byte 64)"),
    ], ids=["malformed", "truncated", "duplicate-key", "list", "no-root", "oversized", "too-deep", "huge-int"])
    def test_bad_config(self, host: HookHost, tmp_path: Path, config: Any, message: str) -> None:
        b = bundle_dir(tmp_path, config)
        refused(host, tmp_path, state_of(b), f"'{b}/config.json' {message}")


class TestSelection:
    @pytest.mark.parametrize("value, message", [
        ("9", "no card 9 in the kunlunxin.com/xpu spec (cards: 0,1,2,3,4,5,6,7); regenerate with `xpu-cdi generate` "
              "if cards changed"),
        ("0,x", "'x' is not a card index, a range like 0-3 or 'all'"),
        ("5-2", "range '5-2' must be low-high with at most 4096 cards"),
        ("1,,2", "'' is not a card index, a range like 0-3 or 'all'"),
        ("npu-1", "'npu-1' is not a card index, a range like 0-3 or 'all'"),  # an alias of another vendor's
        ("GPU-6f1c1e2a-1b2c-4d5e-8f90-1234567890ab", "'GPU-6f1c1e2a-1b2c-4d5e-8f90-1234567890ab' is not a card index, "
                                                     "a range like 0-3 or 'all'"),
        # only ASCII whitespace (" \t\n\v\f\r") pads a token: another control byte is part of it
        ("1\x1c", "'1\\x1c' is not a card index, a range like 0-3 or 'all'"),
    ], ids=["unknown-card", "bad-token", "reversed-range", "empty-token", "alias-token", "uuid", "control-byte"])
    def test_bad_value(self, host: HookHost, tmp_path: Path, value: str, message: str) -> None:
        b = bundle_dir(tmp_path, asks([f"CXPU_VISIBLE_DEVICES={value}"]))
        refused(host, tmp_path, state_of(b), f"CXPU_VISIBLE_DEVICES={value!r}: {message}")

    @pytest.mark.parametrize("value, message", [
        ("kunlunxin.com/xpu=99", f"unresolvable CDI device 'kunlunxin.com/xpu=99' in {{dirs}} (known {KIND} devices: "
                                 "0, 1, 2, 3, 4, 5, 6, 7, all)"),
        ("example.com/gpu=0", "unresolvable CDI device 'example.com/gpu=0' in {dirs} (no spec defines kind "
                              "'example.com/gpu': run `xpu-cdi generate`)"),
        ("kunlunxin.com/xpu", "annotation 'cdi.k8s.io/x': CDI device 'kunlunxin.com/xpu' is not fully qualified: "
                              "write it as vendor/class=name, e.g. kunlunxin.com/xpu=0"),
        ("kunlunxin.com/xpu=1,", "annotation 'cdi.k8s.io/x': value 'kunlunxin.com/xpu=1,' must be a comma-separated "
                                 "list of CDI devices such as kunlunxin.com/xpu=0"),
    ], ids=["device-in-no-spec", "kind-in-no-spec", "not-qualified", "empty-member"])
    def test_bad_annotation(self, host: HookHost, tmp_path: Path, value: str, message: str) -> None:
        b = bundle_dir(tmp_path, asks([], annotations={"cdi.k8s.io/x": value}))
        refused(host, tmp_path, state_of(b), message.format(dirs=host.spec_dir))

    def test_the_alias_of_a_profile_selects(self, tmp_path: Path, alone: Path) -> None:
        """Ascend's Ascend910-N is read as card N (the profile's alias prefix, from the index); a card it
        has not is refused by its number."""
        h = HookHost(tmp_path / "npu", alone / HOOK, "ascend", 2)
        try:
            b = bundle_dir(tmp_path / "one", asks(["ASCEND_VISIBLE_DEVICES=Ascend910-1"]))
            r = hook(h, state_of(b), tmp_path / "one.log")
            assert r.returncode == 1 and r.stderr.decode() == (
                f"{HOOK}: OCI state pid 0 is not a container process of this runtime (a createContainer hook runs "
                "inside the container): register `xpu-cdi-hook prestart` as a prestart or createRuntime hook\n")
            b = bundle_dir(tmp_path / "nine", asks(["ASCEND_VISIBLE_DEVICES=Ascend910-9"]))
            refused(h, tmp_path / "nine", state_of(b), "ASCEND_VISIBLE_DEVICES='Ascend910-9': no card 9 in the "
                    "huawei.com/npu spec (cards: 0,1); regenerate with `xpu-cdi generate` if cards changed")
        finally:
            fakehost.remove_tree(h.base)


class TestSpecFiles:
    def test_broken_spec_beside_a_good_one(self, host: HookHost, tmp_path: Path) -> None:
        """The broken file is named in a warning; the good one still serves its cards (through runc)."""
        broken = host.spec_dir / "zz-broken.json"
        broken.write_text('{"cdiVersion": "0.6.0", "kind": "example.com/gpu", "devices": [')
        try:
            host.log.unlink(missing_ok=True)
            b = host.bundle(["sh", "-c", "stat -c '%n %t:%T' /dev/xpu1"], env=["CXPU_VISIBLE_DEVICES=1"])
            r = runtimes.run_runc(b)
            assert r.returncode == 0, container_output(r)
            assert "/dev/xpu1 f0:1" in r.stdout
            lines = log_lines(host.log)
            assert lines[0] == (f"warning: spec '{broken}': not valid JSON: premature EOF at line 1, column 64 "
                                "(byte 63)"), lines
            assert lines[1].startswith(f"injected {KIND}=1: "), lines
        finally:
            broken.unlink()
            shutil.rmtree(b.dir, ignore_errors=True)

    def test_yaml_spec_written_by_another_tool(self, host: HookHost, tmp_path: Path) -> None:
        """A YAML spec as Go's yaml.Marshal writes it (keys sorted, strings bare), beside ours: its
        device is injected through runc from the annotation naming it."""
        d = tmp_path / "cdi"
        shutil.copytree(host.spec_dir, d)
        (d / "vendor.yaml").write_text(
            "cdiVersion: 0.6.0\ncontainerEdits:\n  env:\n  - VENDOR_VISIBLE=all\ndevices:\n- containerEdits:\n"
            "    deviceNodes:\n    - hostPath: /dev/null\n      path: /dev/accel0\n      permissions: rw\n"
            "  name: \"0\"\nkind: vendor.example/accel\n")
        b = runtimes.Bundle(tmp_path)
        b.set_process(["sh", "-c", "stat -c '%n %t:%T' /dev/accel0"])
        b.config["annotations"]["cdi.k8s.io/v"] = "vendor.example/accel=0"
        entry = host.hook_entry()
        entry["env"] = [*entry["env"][:-1], f"XPU_CDI_SPEC_DIRS={d}"]
        b.config["hooks"] = {"prestart": [entry]}
        r = runtimes.run_runc(b)
        assert r.returncode == 0, container_output(r)
        assert "/dev/accel0 1:3\n" in r.stdout, r.stdout

    def test_conflicting_device_is_dropped_and_named(self, host: HookHost, tmp_path: Path) -> None:
        """The same card in two files of one dir: both dropped, one warning, the request refused saying so."""
        d = tmp_path / "cdi"
        d.mkdir()
        for f in host.spec_dir.iterdir():
            shutil.copy(f, d / f.name)
        twin = d / "twin.json"
        twin.write_text(json.dumps({"cdiVersion": "0.6.0", "kind": KIND,
                                    "devices": [{"name": "1", "containerEdits": {}}]}))
        b = bundle_dir(tmp_path / "b", asks(["CXPU_VISIBLE_DEVICES=1"]))
        spec = host.spec_path.name
        problem = f"conflicting device '{KIND}=1' in '{d}/{spec}', '{twin}': both dropped; keep it in one file"
        log = tmp_path / "log"
        r = hook(host, state_of(b), log, d)
        message = (f"unresolvable CDI device '{KIND}=1' in {d} (known {KIND} devices: 0, 2, 3, 4, 5, 6, 7, all); "
                   f"skipped: {problem}")
        assert (r.returncode, r.stderr.decode()) == (1, f"{HOOK}: {message}\n")
        assert log_lines(log) == [f"warning: {problem}", f"error: {message}"]


class TestUsage:
    @pytest.mark.parametrize("args, code, err", [
        ([], 1, "no subcommand given: register `xpu-cdi-hook prestart` as the hook (see `xpu-cdi-hook --help`)\n"),
        (["--bogus"], 1, "unknown option '--bogus' (see `xpu-cdi-hook --help`)\n"),
        (["prestart", "extra"], 1, "prestart: unexpected argument 'extra' (see `xpu-cdi-hook --help`)\n"),
        (["prestart", "--spec-dir"], 1, "option --spec-dir needs a value (see `xpu-cdi-hook --help`)\n"),
        (["future-hook"], 0, "warning: unknown subcommand 'future-hook' ignored (this is xpu-cdi-hook from an older "
                             "release?)\n"),
    ])
    def test_arguments(self, alone: Path, args: List[str], code: int, err: str) -> None:
        r = subprocess.run([str(alone / HOOK), *args], capture_output=True, text=True, timeout=30, env={"PATH": ""},
                           stdin=subprocess.DEVNULL)
        assert (r.returncode, r.stdout, r.stderr) == (code, "", f"{HOOK}: {err}")

    def test_help(self, alone: Path) -> None:
        r = subprocess.run([str(alone / HOOK), "--help"], capture_output=True, text=True, timeout=30, env={})
        assert r.returncode == 0 and r.stderr == "" and r.stdout.startswith(f"usage: {HOOK} [--spec-dir DIR]...")
        assert f"{HOOK} --version\n" in r.stdout

    def test_version(self, alone: Path) -> None:
        """The package version (src/xpu_cdi/_version.py, which build_bin.py passes in), in click's shape."""
        r = subprocess.run([str(alone / HOOK), "--version"], capture_output=True, text=True, timeout=30, env={},
                           stdin=subprocess.DEVNULL)
        assert (r.returncode, r.stdout, r.stderr) == (0, f"{HOOK}, version {VERSION}\n", "")


class TestWrapper:
    def wrap(self, alone: Path, host: HookHost, b: Path, *args: str,
             env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(alone / WRAPPER), *args, "create", "--bundle", str(b), "c1"], capture_output=True,
                              text=True, timeout=30, stdin=subprocess.DEVNULL,
                              env={"PATH": "", "XPU_CDI_RUNTIME": "/bin/true", "XPU_CDI_SPEC_DIRS": str(host.spec_dir),
                                   **(env or {})})

    @pytest.mark.parametrize("config, message", [
        (None, "cannot read '{b}/config.json': No such file or directory: is --bundle right?"),
        ('{"process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}',
         "'{b}/config.json' is not valid JSON: premature EOF at line 1, column 48 (byte 47)"),
        (asks(["CXPU_VISIBLE_DEVICES=9"]),
         "CXPU_VISIBLE_DEVICES='9': no card 9 in the kunlunxin.com/xpu spec (cards: 0,1,2,3,4,5,6,7); regenerate with "
         "`xpu-cdi generate` if cards changed (spec dirs searched: {dirs})"),
        (asks([], annotations={"cdi.k8s.io/x": "kunlunxin.com/xpu=99"}),
         f"unresolvable CDI device '{KIND}=99' in {{dirs}} (known {KIND} devices: 0, 1, 2, 3, 4, 5, 6, 7, all)"),
        (asks(["ASCEND_VISIBLE_DEVICES=0"]),
         "ASCEND_VISIBLE_DEVICES='0' asks for huawei.com/npu devices but no spec in {dirs} defines that kind (with its "
         ".xpu-cdi index): run `xpu-cdi generate` on this node"),
        # ASCII whitespace around a value is no request, another control byte is one
        (asks(["ASCEND_VISIBLE_DEVICES= \x1c\t"]),
         "ASCEND_VISIBLE_DEVICES='\\x1c' asks for huawei.com/npu devices but no spec in {dirs} defines that kind (with "
         "its .xpu-cdi index): run `xpu-cdi generate` on this node"),
    ], ids=["missing-config", "truncated-config", "unknown-card", "device-in-no-spec", "kind-in-no-spec",
            "kind-in-no-spec-control-byte"])
    def test_refused_in_one_line(self, alone: Path, host: HookHost, tmp_path: Path, config: Any,
                                 message: str) -> None:
        """One line on stderr and in the runtime's --log, exit 1, config.json untouched, no runtime run."""
        b = bundle_dir(tmp_path, config)
        before = tree(tmp_path)
        log = tmp_path.parent / f"{tmp_path.name}.runc.log"
        r = self.wrap(alone, host, b, "--log", str(log), "--log-format", "json")
        want = message.format(b=b, dirs=host.spec_dir)
        assert (r.returncode, r.stdout, r.stderr) == (1, "", f"{WRAPPER}: {want}\n")
        [entry] = [json.loads(line) for line in log.read_text().splitlines()]
        assert entry["level"] == "error" and entry["msg"] == f"{WRAPPER}: {want}"
        assert tree(tmp_path) == before

    def test_loop_guard_and_no_runtime(self, alone: Path, host: HookHost, tmp_path: Path) -> None:
        b = bundle_dir(tmp_path, asks([]))
        r = self.wrap(alone, host, b, env={"XPU_CDI_WRAPPER_ACTIVE": "1"})
        assert (r.returncode, r.stderr) == (1, f"{WRAPPER}: started by itself (XPU_CDI_RUNTIME or PATH names another "
                                               "copy of the wrapper as the real runtime): point XPU_CDI_RUNTIME at "
                                               "runc or crun\n")
        r = self.wrap(alone, host, b, env={"XPU_CDI_RUNTIME": "no-such-runc", "PATH": str(tmp_path)})
        assert (r.returncode, r.stderr) == (1, f"{WRAPPER}: no 'no-such-runc' found on PATH ({tmp_path}): install it "
                                               "or set XPU_CDI_RUNTIME to the runtime's absolute path\n")

    def test_broken_spec_beside_a_good_one(self, alone: Path, host: HookHost, tmp_path: Path) -> None:
        d = tmp_path / "cdi"
        d.mkdir()
        for f in host.spec_dir.iterdir():
            shutil.copy(f, d / f.name)
        (d / "zz-broken.json").write_text("[]")
        b = bundle_dir(tmp_path, asks(["CXPU_VISIBLE_DEVICES=1"]))
        r = self.wrap(alone, host, b, env={"XPU_CDI_SPEC_DIRS": str(d)})
        assert (r.returncode, r.stderr) == (0, f"{WRAPPER}: warning: spec '{d}/zz-broken.json': expected an object "
                                               "at the top\n")
        assert any(n["path"] == "/dev/xpu1" for n in json.loads((b / "config.json").read_text())["linux"]["devices"])


@pytest.mark.parametrize("binary", [HOOK, WRAPPER])
@pytest.mark.parametrize("value, shown", [
    (":{d}::", "{d}"),  # empty entries skipped
    ("", "/etc/cdi:/var/run/cdi"),  # none given: the CDI defaults
    ("{d64}", "{d64}"),
    ("{d65}", None),
], ids=["empty-entries", "defaults", "64-dirs", "65-dirs"])
def test_spec_dirs_read_alike(alone: Path, host: HookHost, tmp_path: Path, binary: str, value: str,
                              shown: Optional[str]) -> None:
    """XPU_CDI_SPEC_DIRS as both binaries read it (one function, lib/spec_dirs.c): split on ':', empty entries
    skipped, the CDI defaults when nothing is left, more than 64 dirs refused (a later dir wins: dropping
    the rest could answer "nothing asked").  An unknown device's refusal names the dirs searched."""
    many = [f"/no/{i}" for i in range(65)]  # short: the message holds them all
    subst = {"d": str(host.spec_dir), "d64": ":".join(many[:64]), "d65": ":".join(many)}
    b = bundle_dir(tmp_path, asks([], annotations={"cdi.k8s.io/x": f"{KIND}=99"}))
    env = {"PATH": "", "XPU_CDI_RUNTIME": "/bin/true", "XPU_CDI_SPEC_DIRS": value.format(**subst)}
    if binary == HOOK:
        r = subprocess.run([str(alone / HOOK), "prestart"], input=json.dumps(state_of(b)).encode(), env=env,
                           capture_output=True, timeout=30)
    else:
        r = subprocess.run([str(alone / WRAPPER), "create", "--bundle", str(b), "c1"], env=env, capture_output=True,
                           timeout=30, stdin=subprocess.DEVNULL)
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1, err
    if shown is None:
        assert err == f"{binary}: more than 64 spec dirs in XPU_CDI_SPEC_DIRS: keep the few that hold CDI specs\n"
    else:
        assert err.startswith(f"{binary}: unresolvable CDI device '{KIND}=99' in {shown.format(**subst)} ("), err


def no_python_bundle(host: HookHost, base: Path) -> "runtimes.Bundle":
    b = runtimes.Bundle(base)
    b.set_process(["sh", "-c", "stat -c '%n %t:%T' /dev/xpu1 /dev/xpu3; ls /dev | grep -c '^xpu[0-9]'"])
    return b


def traced(cmd: List[str], log: Path, env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    """*cmd* under `strace -ff -e trace=execve`: every program it and its children exec'd goes to
    *log*.<pid> (a file per process, so that no call is split across lines by another's)."""
    strace = shutil.which("strace") or "strace"
    return subprocess.run([strace, "-ff", "-qq", "-e", "trace=execve", "-o", str(log), *cmd], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, env=env)


def execs(log: Path) -> List[str]:
    """The programs a traced run exec'd (successful execve calls only), each path followed by its argv[0]."""
    out = []
    for line in (line for f in log.parent.glob(f"{log.name}.*") for line in f.read_text().splitlines()):
        m = re.search(r'execve\("([^"]*)", \["([^"]*)".* = 0$', line)
        if m:
            out += [m.group(1), m.group(2)]
    return out


@pytest.mark.runtime
def test_binaries_alone_with_no_python_reachable(host: HookHost, alone: Path, tmp_path: Path) -> None:
    """The hook (prestart) and the wrapper each inject through a real `runc run` with PATH empty, no
    interpreter reachable and nothing beside them: the dir holds the two binaries and nothing else,
    and strace sees no interpreter exec'd by runc, the wrapper, the hooks or the container."""
    runtimes.require("runc")
    if not shutil.which("strace"):
        pytest.fail("strace is missing: scripts/install-deps.sh installs it")
    runc = shutil.which("runc")
    assert runc and sorted(p.name for p in alone.iterdir()) == [HOOK, WRAPPER]
    # the hook, registered as prestart, its env empty of PATH
    b = no_python_bundle(host, tmp_path)
    b.config["process"]["env"].append("CXPU_VISIBLE_DEVICES=1,3")
    b.config["hooks"] = {"prestart": [{"path": str(alone / HOOK), "args": [HOOK, "prestart", "--log", str(host.log)],
                                       "env": ["PATH=", f"XPU_CDI_SPEC_DIRS={host.spec_dir}"], "timeout": 20}]}
    b.write()
    cid = runtimes.unique("xc")
    try:
        r = traced([runc, "run", "--bundle", str(b.dir), cid], tmp_path / "hook.trace")
    finally:
        subprocess.run([runc, "delete", "--force", cid], capture_output=True)
    assert r.returncode == 0, container_output(r)
    assert "/dev/xpu1 f0:1\n/dev/xpu3 f0:3\n2\n" in r.stdout, r.stdout
    ran = execs(tmp_path / "hook.trace")
    assert str(alone / HOOK) in ran and not [p for p in ran if "python" in os.path.basename(p)], ran
    # the wrapper as the runtime, PATH empty (runc named by XPU_CDI_RUNTIME); the spec's own
    # createContainer hook (update-ldcache) is the copied hook, run by runc from config.json
    b = no_python_bundle(host, tmp_path)
    b.config["process"]["env"].append("CXPU_VISIBLE_DEVICES=3,1")
    b.write()
    cid = runtimes.unique("xc")
    try:
        r = traced([str(alone / WRAPPER), "run", "--bundle", str(b.dir), cid], tmp_path / "wrapper.trace",
                   env={"PATH": "", "XPU_CDI_RUNTIME": runc, "XPU_CDI_SPEC_DIRS": str(host.spec_dir)})
    finally:
        subprocess.run([runc, "delete", "--force", cid], capture_output=True)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "/dev/xpu1 f0:1\n/dev/xpu3 f0:3\n2\n" in r.stdout, r.stdout
    hooks = json.loads((b.dir / "config.json").read_text()).get("hooks", {}).get("createContainer", [])
    assert [h["path"] for h in hooks] == [str(alone / HOOK)], hooks
    ran = execs(tmp_path / "wrapper.trace")
    assert str(alone / WRAPPER) in ran and runc in ran and str(alone / HOOK) in ran, ran
    assert not [p for p in ran if "python" in os.path.basename(p)], ran
    assert sorted(p.name for p in alone.iterdir()) == [HOOK, WRAPPER]


V1_DEVICES = Path("/sys/fs/cgroup/devices")
# run by `unshare -m` before the hook: the v1 devices hierarchy mounted again at $1 and the usual
# mount of it gone, a tmpfs at $2; then the hook (in this private mount namespace alone)
REMOUNT = ('mount -t cgroup -o devices xpu-cdi-test "$1" && mount -t tmpfs xpu-cdi-test "$2" && '
           'umount /sys/fs/cgroup/devices && exec "$3" prestart --log "$4"')


@pytest.mark.skipif(not (V1_DEVICES / "devices.allow").exists(), reason="no cgroup v1 devices controller on this host")
def test_devices_cgroup_found_below_escaped_and_non_ascii_mount_points(alone: Path, tmp_path: Path) -> None:
    """/proc/self/mountinfo read as the kernel writes it: the v1 devices hierarchy mounted at a path
    holding a space, a tab and a backslash (shown as \\040, \\011, \\134) and, beside it, a tmpfs named
    with non-ASCII bytes and a control character (shown raw): the hook finds the container's devices
    cgroup below the escaped mount point and allows its node there."""
    cg = V1_DEVICES / runtimes.unique("xpu-cdi-mountinfo")
    cg.mkdir()
    sleeper = None
    try:
        (cg / "devices.deny").write_text("a")
        sleeper = subprocess.Popen(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cg),
                                    "unshare", "-m", "--propagation", "private", "sleep", "3600"])
        runtimes.wait_for_exec(sleeper, "sleep")
        specs = tmp_path / "cdi"
        specs.mkdir()
        (specs / "mi.json").write_text(json.dumps({"cdiVersion": "0.7.0", "kind": "example.com/mi", "devices": [
            {"name": "a", "containerEdits": {"deviceNodes": [{"path": "/dev/x0", "type": "c", "major": 240,
                                                              "minor": 0, "fileMode": 0o640}],
                                                "hooks": [{"hookName": "createContainer", "path": "/usr/bin/h\u00f4te",
                                                           "args": ["h\u00f4te", "stuff"]}]}}]}))
        rootfs = runtimes.make_rootfs(tmp_path / "bundle" / "rootfs")
        (rootfs.parent / "config.json").write_text(json.dumps({"root": {"path": "rootfs"},
                                                               "annotations": {"cdi.k8s.io/x": "example.com/mi=a"}}))
        weird = tmp_path / "dev ices\tx\\y"
        other = tmp_path / "caf\u00e9\x01"
        weird.mkdir()
        other.mkdir()
        log = tmp_path / "hook.log"
        state = {"id": "mi", "pid": sleeper.pid, "bundle": str(rootfs.parent)}
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", REMOUNT, "sh", str(weird),
                            str(other), str(alone / HOOK), str(log)], input=json.dumps(state).encode(),
                           capture_output=True, timeout=60,
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "XPU_CDI_SPEC_DIRS": str(specs)})
        lines = log.read_text().splitlines() if log.exists() else []
        assert r.returncode == 0, (r.stderr.decode(errors="replace"), lines)
        assert "injected example.com/mi=a: 1 node(s)" in lines[-1] and "cgroup v1" in lines[-1], lines
        assert "c 240:0 rwm" in (cg / "devices.list").read_text().splitlines()
        # another tool's hook is not run, and the note names it as every message quotes a value
        assert any("spec hook '/usr/bin/h\\xc3\\xb4te' stuff not run: " in line for line in lines), lines
    finally:
        if sleeper is not None:
            sleeper.kill()
            sleeper.wait()
        cg.rmdir()


@pytest.mark.skipif(not (V1_DEVICES / "devices.allow").exists(), reason="no cgroup v1 devices controller on this host")
def test_devices_cgroup_of_a_subtree_mount_is_not_taken_for_the_usual_layout(alone: Path, tmp_path: Path) -> None:
    """The hook tries /sys/fs/cgroup/devices/<the path in /proc/PID/cgroup> before reading mountinfo, and takes
    it only when the container's pid is listed there.  Here the hierarchy is mounted at M and its subtree P
    at /sys/fs/cgroup/devices (as in a container's view), the container is in P/P, and P/P/P exists: the
    usual-layout path names P/P/P, which does not list the pid, so mountinfo decides (M) and the rule goes
    to P/P."""
    top = V1_DEVICES / runtimes.unique("xpu-cdi-sub")
    mine, decoy = top / top.name, top / top.name / top.name
    mine.mkdir(parents=True)
    sleeper = None
    try:
        (mine / "devices.deny").write_text("a")  # the kernel takes "a" only while there are no children
        decoy.mkdir()
        sleeper = subprocess.Popen(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(mine),
                                    "unshare", "-m", "--propagation", "private", "sleep", "3600"])
        runtimes.wait_for_exec(sleeper, "sleep")
        specs = tmp_path / "cdi"
        specs.mkdir()
        (specs / "sub.json").write_text(json.dumps({"cdiVersion": "0.5.0", "kind": "example.com/sub", "devices": [
            {"name": "a", "containerEdits": {"deviceNodes": [{"path": "/dev/x0", "type": "c", "major": 240,
                                                              "minor": 0, "fileMode": 0o640}]}}]}))
        b = bundle_dir(tmp_path, {"root": {"path": "rootfs"}, "annotations": {"cdi.k8s.io/x": "example.com/sub=a"}})
        log = tmp_path / "hook.log"
        m = tmp_path / "m"
        m.mkdir()
        remount = ('mount -t cgroup -o devices xpu-cdi-test "$0" && umount /sys/fs/cgroup/devices && '
                   'mount --bind "$0/$1" /sys/fs/cgroup/devices && shift && exec "$@"')
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", remount, str(m), top.name,
                            str(alone / HOOK), "prestart", "--log", str(log)],
                           input=json.dumps({"id": "sub", "pid": sleeper.pid, "bundle": str(b)}).encode(),
                           capture_output=True, timeout=60,
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "XPU_CDI_SPEC_DIRS": str(specs)})
        assert r.returncode == 0, (r.stderr.decode(errors="replace"), log.read_text() if log.exists() else "")
        assert "c 240:0 rwm" in (mine / "devices.list").read_text().splitlines()
        assert "c 240:0 rwm" not in (decoy / "devices.list").read_text().splitlines()
    finally:
        if sleeper is not None:
            sleeper.kill()
            sleeper.wait()
        for cg in (decoy, mine, top):
            deadline = time.monotonic() + 60  # empty once the kernel has reaped the sleeper
            while True:
                try:
                    cg.rmdir()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)


def libyaml_path() -> str:
    """Where ld.so finds libyaml-0.so.2 on this host (the hook dlopens it by that name)."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    return next(line.split(" => ")[1].strip() for line in out.splitlines()
                if line.strip().startswith("libyaml-0.so.2 ") and "x86-64" in line)


def without_libyaml(cmd: List[str]) -> List[str]:
    """*cmd* in a private mount namespace where libyaml-0.so.2 is an empty file: loading it fails."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", 'mount --bind /dev/null "$0" && exec "$@"',
            libyaml_path(), *cmd]


@pytest.fixture(scope="module")
def dynamic_host(build_bin: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HookHost]:
    """The fake host with the hook linked dynamically (build_bin.build(static=False))."""
    base = tmp_path_factory.mktemp("dynamic-hook")
    base.chmod(0o755)
    built = Path(build_bin.build(str(base / "bin"), [HOOK], static=False)[0])
    (base / "bin").chmod(0o755)
    h = HookHost(base / "xpu", built, "kunlunxin", 8)
    yield h
    fakehost.remove_tree(h.base)


class TestLibyamlOnDemand:
    """The dynamically linked hook (where the static archives are missing: build_bin.STATIC_BY_DEFAULT)
    loads libyaml when a YAML file is first read, not at every start: a start reading only JSON works
    without it, and one that needs it says which package to install."""

    @pytest.fixture
    def host(self, dynamic_host: HookHost) -> HookHost:
        return dynamic_host

    def test_json_only_start_needs_no_libyaml(self, host: HookHost, tmp_path: Path) -> None:
        b = bundle_dir(tmp_path, asks(["A=1"]))
        r = subprocess.run(without_libyaml([str(host.hook), "prestart", "--config", str(tmp_path / "none.yaml")]),
                           input=json.dumps(state_of(b)).encode(), capture_output=True, timeout=30,
                           env={"PATH": "/usr/bin:/bin", "XPU_CDI_SPEC_DIRS": str(host.spec_dir)})
        assert (r.returncode, r.stderr) == (0, b"")

    def test_node_config_without_libyaml(self, host: HookHost, tmp_path: Path) -> None:
        cfg = tmp_path / "config.yaml"
        cfg.write_text("accept-env-selection-when-unprivileged: false\n")
        b = bundle_dir(tmp_path, asks(["A=1"]))
        r = subprocess.run(without_libyaml([str(host.hook), "prestart", "--config", str(cfg)]),
                           input=json.dumps(state_of(b)).encode(), capture_output=True, timeout=30,
                           env={"PATH": "/usr/bin:/bin", "XPU_CDI_SPEC_DIRS": str(host.spec_dir)})
        err = r.stderr.decode()
        assert r.returncode == 1 and err.count("\n") == 1, err
        assert err.startswith(f"{HOOK}: node config {cfg} cannot be read: cannot load libyaml-0.so.2 ("), err
        assert err.endswith("): install libyaml-0-2 (libyaml on RPM distributions)\n"), err

    def test_yaml_spec_without_libyaml_is_a_skipped_file(self, host: HookHost, tmp_path: Path) -> None:
        d = tmp_path / "cdi"
        d.mkdir()
        spec = d / "vendor.yaml"
        spec.write_text("cdiVersion: 0.6.0\nkind: vendor.example/accel\ndevices:\n- name: \"0\"\n"
                        "  containerEdits:\n    env: [A=1]\n")
        b = bundle_dir(tmp_path, asks([], annotations={"cdi.k8s.io/v": "vendor.example/accel=0"}))
        r = subprocess.run(without_libyaml([str(host.hook), "prestart"]), input=json.dumps(state_of(b)).encode(),
                           capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin", "XPU_CDI_SPEC_DIRS": str(d)})
        err = r.stderr.decode()
        assert r.returncode == 1, err
        assert err.startswith(f"{HOOK}: unresolvable CDI device 'vendor.example/accel=0' in {d} (no spec defines kind "
                              f"'vendor.example/accel': run `xpu-cdi generate`); skipped: spec '{spec}' cannot be "
                              "read: cannot load libyaml-0.so.2 ("), err
