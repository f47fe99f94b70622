"""The two binaries under AddressSanitizer and UBSan, black-box, on hostile input.

xpu-cdi-hook and xpu-container-runtime are built once per test session from
build_bin.py's own source lists with ``-fsanitize=address,undefined
-fno-sanitize-recover=all`` and fed what a pod controls (config.json, the OCI
state, annotations, selection values), what an image controls (the rootfs)
and what an admin might get wrong (spec dirs, YAML specs, argv): deeply
nested, truncated and random JSON, invalid UTF-8, huge numbers, alias bombs;
odd config.json shapes and edits; the hook through a whole injection and its
rollback.  Each run must end answered (0) or refused in one line (1).

A sanitizer report ends the process with exit code 99 (ASan) or 98 (UBSan);
every run here asserts the code it expects and that stderr holds no report.
Leaks are not checked: the binaries never free, by design (lib/common.h).
The parsers are also fuzzed (tests/c/test_fuzz_native.py, fuzz/native/).
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from support import fakehost
from support import runtimes

SAN_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-O1", "-g"]
ASAN_EXIT, UBSAN_EXIT = 99, 98
SAN_ENV = {"ASAN_OPTIONS": f"detect_leaks=0:abort_on_error=0:exitcode={ASAN_EXIT}",
           "UBSAN_OPTIONS": f"print_stacktrace=1:halt_on_error=1:exitcode={UBSAN_EXIT}"}
NO_PID = (1 << 22) + 7  # above the largest pid_max: never a process
REPORTS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: UndefinedBehaviorSanitizer")
TARGETS = ("xpu-cdi-hook", "xpu-container-runtime")
V1_DEVICES = Path("/sys/fs/cgroup/devices")
GPU = "example.com/gpu"
CANARY = r"""
#include <limits.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
    char *p = calloc(1, 8), copy[16] = {0};
    volatile int big = INT_MAX;
    if (argc > 1 && strcmp(argv[1], "heap") == 0)
        memcpy(copy, p, 7 + (size_t)argc);  /* 9 bytes of 8 */
    if (argc > 1 && strcmp(argv[1], "ub") == 0)
        big = big + argc;
    return big == 0 || copy[8] == 1;
}
"""
FAKE_RUNTIME = """#!/bin/sh
# the real runtime of these tests: records its argv and the config.json it was given
printf '%s\n' "$@" > "$RECORD/argv"
cp "$BUNDLE/config.json" "$RECORD/config.json" 2>/dev/null
exit 0
"""


@pytest.fixture(scope="session")
def san_build(build_bin: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sanitized binaries and a canary: built once per test session, in the session's temp dir that
    xdist's workers share (under a lock: the first worker builds, the others wait for it)."""
    build = build_bin
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    d = shared / "c-sanitized"
    with open(shared / "c-sanitized.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / "built").exists():
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir()
            (d / "canary.c").write_text(CANARY)
            probe = subprocess.run([*build.compiler(), *SAN_FLAGS, "-o", str(d / "canary"), str(d / "canary.c")],
                                   capture_output=True, text=True)
            if probe.returncode != 0:
                (d / "built").write_text(
                    "the C compiler cannot build with -fsanitize=address,undefined (Debian: libasan8 and "
                    f"libubsan1, which gcc brings): {probe.stderr.strip().splitlines()[-1:]}")
            else:
                assert set(build.TARGETS) == set(TARGETS), build.TARGETS
                with ThreadPoolExecutor(len(TARGETS)) as pool:  # one compiler per target: both cores busy
                    list(pool.map(lambda t: build.build(str(d), [t], extra_cflags=SAN_FLAGS, static=False), TARGETS))
                (d / "built").write_text("")
    why = (d / "built").read_text()
    if why:
        pytest.skip(why)
    return d


@pytest.fixture(scope="module")
def san(san_build: Path) -> Iterator[Path]:
    """san_build, with the sanitizer options in os.environ meanwhile."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in SAN_ENV.items():
            mp.setenv(k, v)
        yield san_build


def clean(r: subprocess.CompletedProcess, *codes: int) -> str:
    """stderr of a run that exited with one of *codes* (default 0) and printed no sanitizer report."""
    err = r.stderr.decode(errors="replace") if isinstance(r.stderr, bytes) else r.stderr
    found = [h for h in REPORTS if h in err]
    assert not found and r.returncode not in (ASAN_EXIT, UBSAN_EXIT), f"sanitizer report ({r.returncode}):\n{err}"
    assert r.returncode in (codes or (0,)), (r.returncode, err[-2000:])
    return err


def refusal(err: str, prog: str) -> str:
    """The one error line of a refused run (warnings, one line each, may come before it)."""
    lines = [line for line in err.splitlines() if not line.startswith(f"{prog}: warning: ")]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: "), err[-2000:]
    return lines[0]


def mutate(rng: random.Random, doc: bytes) -> bytes:
    """*doc* truncated, or with a byte changed, inserted or deleted."""
    if not doc:
        return bytes([rng.randrange(256)])
    i = rng.randrange(len(doc))
    what = rng.randrange(4)
    if what == 0:
        return doc[:i]
    pick = rng.choice([rng.randrange(256), *b'"\\[]{},:-.eE0u \x00\x1f\x7f\xc3\xed\xf4\xff&*!|>'])
    if what == 1:
        return doc[:i] + bytes([pick]) + doc[i + 1:]
    if what == 2:
        return doc[:i] + bytes([pick]) + doc[i:]
    return doc[:i] + doc[i + 1:]


def write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))


def gpu_spec(names: List[str], shared: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    spec: Dict[str, Any] = {"cdiVersion": "0.6.0", "kind": GPU,
                            "devices": [{"name": n, "containerEdits": {"env": [f"GPU_{n}=1"]}} for n in names]}
    if shared:
        spec["containerEdits"] = shared
    return spec


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Specs as `xpu-cdi generate` writes them: a 4-card Kunlunxin host (JSON) and a 4-card Ascend host (YAML),
    with their hook indexes."""
    base = tmp_path_factory.mktemp("san-gen")
    cdi = base / "cdi"
    exe = str(Path(sys.executable).parent / "xpu-cdi")
    for maker, fmt in ((fakehost.kunlunxin, "json"), (fakehost.ascend, "yaml")):
        host = maker(base / fmt, 4)
        r = subprocess.run([exe, "generate", *host.cli_roots, "--spec-dir", str(cdi), "--format", fmt],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    yield cdi
    fakehost.remove_tree(base)


class Box:
    """A bundle, spec dirs and a recording fake runtime for the sanitized wrapper."""

    def __init__(self, tmp: Path, spec_dirs: List[Path]) -> None:
        self.record = tmp / "record"
        self.record.mkdir(parents=True)
        fake = tmp / "fake-runc"
        fake.write_text(FAKE_RUNTIME)
        fake.chmod(0o755)
        self.bundle = tmp / "bundle"
        self.bundle.mkdir()
        self.env = {"PATH": "/usr/bin:/bin", "XPU_CDI_RUNTIME": str(fake), "RECORD": str(self.record),
                    "BUNDLE": str(self.bundle), "XPU_CDI_SPEC_DIRS": ":".join(map(str, spec_dirs))}

    def config(self, env: List[str], annotations: Optional[Dict[str, str]] = None, **extra: Any) -> bytes:
        cfg = {"ociVersion": "1.0.2", "process": {"user": {"uid": 0, "gid": 0}, "args": ["sh"], "cwd": "/",
                                                  "env": ["PATH=/usr/bin:/bin", *env]},
               "root": {"path": "rootfs"}, "annotations": annotations or {},
               "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
               "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}, **extra}
        text = json.dumps(cfg, indent="\t").encode()
        (self.bundle / "config.json").write_bytes(text)
        return text

    def ran(self) -> bool:
        return (self.record / "argv").exists()

    def seen_config(self) -> bytes:
        return (self.record / "config.json").read_bytes()


def wrapper_run(san: Path, box: Box, *args: str, env: Optional[Dict[str, str]] = None,
                cwd: Optional[Path] = None) -> str:
    """A run of the sanitized wrapper: it ran the runtime (0) or refused in one line (1)."""
    for p in box.record.iterdir():
        p.unlink()
    r = subprocess.run([str(san / "xpu-container-runtime"), *args], input=b"", capture_output=True, timeout=60,
                       cwd=cwd, env={**box.env, **SAN_ENV, **(env or {})})
    err = clean(r, 0, 1)
    if r.returncode == 1:
        refusal(err, "xpu-container-runtime")
    return err


def create(san: Path, box: Box, config: bytes, env: Optional[Dict[str, str]] = None) -> str:
    (box.bundle / "config.json").write_bytes(config)
    err = wrapper_run(san, box, "--root", "/r", "create", "--bundle", str(box.bundle), "c1", env=env)
    assert box.ran() or err, "neither ran the runtime nor said why"
    assert not [p.name for p in box.bundle.iterdir() if "xpu-cdi-tmp" in p.name]
    return err


def test_the_sanitizers_report(san: Path) -> None:
    """The harness sees a report: a heap overflow and a signed overflow in a canary built the same way."""
    heap = subprocess.run([str(san / "canary"), "heap"], capture_output=True, text=True)
    ub = subprocess.run([str(san / "canary"), "ub"], capture_output=True, text=True)
    assert heap.returncode == ASAN_EXIT and "heap-buffer-overflow" in heap.stderr, heap
    assert ub.returncode == UBSAN_EXIT and "signed integer overflow" in ub.stderr, ub
    clean(subprocess.run([str(san / "canary")], capture_output=True))
    for t in TARGETS:
        nm = subprocess.run(["nm", str(san / t)], capture_output=True, text=True)
        assert nm.returncode != 0 or "__asan" in nm.stdout, f"{t}: not an ASan build"


# -- JSON: the OCI state and config.json --------------------------------------

def big_config(size: int) -> Dict[str, Any]:
    """A config.json of about *size* bytes, like a runtime engine writes it."""
    rng = random.Random(7)
    env = [f"VAR_{i}={'x' * rng.randrange(80)}\u00e9" for i in range(size // 50)]
    mounts = [{"destination": f"/mnt/{i}", "type": "bind", "source": f"/host/{i}", "options": ["rbind", "ro"]}
              for i in range(200)]
    return {"ociVersion": "1.0.2", "process": {"user": {"uid": 0, "gid": 0}, "args": ["sh", "-c", "echo \"hi\"\n"],
                                               "env": env, "cwd": "/",
                                               "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 18446744073709551615,
                                                            "soft": 1048576}]},
            "root": {"path": "rootfs", "readonly": True}, "mounts": mounts,
            "annotations": {"cdi.k8s.io/xpu": "kunlunxin.com/xpu=1", "io.kubernetes.cri.sandbox-id": "a" * 64},
            "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}], "cpu": {"shares": 2.5}},
                      "namespaces": [{"type": t} for t in ["pid", "ipc", "uts", "mount", "network"]]}}


def hostile_json() -> List[bytes]:
    rng = random.Random(5)
    big = json.dumps(big_config(300_000)).encode()
    docs = [
        b'{"a":' * 99 + b"[]" + b"}" * 99, b'{"a":' * 256 + b"1" + b"}" * 256, b"[{" * 128 + b"}]" * 128,
        b"[" * 257, b'{"' * 300, b'"' + b"\\u0000" * 20000 + b'"', b'"' + b"\\ud83d\\ude00" * 50000 + b'"',
        b'"' + b"\\ud83d" * 3 + b'"', b'"\\ud83d\\u', b'"\\ud83d\\', b'"\\u00', b'"' + bytes(range(0x80, 0x100)) + b'"',
        b'"' + b"\xf0\x9f\x98" + b'"', b'"\xf4\x90\x80\x80"', b"1e999999999999999999999", b"-1e-999999999",
        b"0." + b"0" * 100_000 + b"1", b"-" + b"9" * 640, b"9" * 640 + b"e1", b"[" + b"-0," * 50_000 + b"0]",
        b"{" + b",".join(b'"k%d":%d' % (i, i) for i in range(20_000)) + b"}", b" " * (1 << 20) + b"null",
        b'{"k":1,"k":2}', b"[" + b",".join([b"{}"] * 100_000) + b"]", b'{"":' + b'""' + b"}", b"\xef\xbb\xbf",
        b"\x00" * 64, b"[1e400]", b"[18446744073709551616]", b"[-9223372036854775809]", b"NaN", b"[1,]",
    ]
    docs += [big[:rng.randrange(len(big))] for _ in range(30)]  # truncations
    docs += [mutate(rng, big) for _ in range(15)]
    docs += [bytes(rng.randrange(256) for _ in range(rng.randrange(200))) for _ in range(100)]
    return docs


def test_json_hostile_documents(san: Path, tmp_path: Path, generated: Path) -> None:
    """Each hostile document as the hook's OCI state, as the config.json a state points the hook at, and as the
    wrapper's config.json (marked so that it is parsed): answered or refused in one line, no report."""
    docs = hostile_json()
    env = {"PATH": "/usr/bin:/bin", "XPU_CDI_SPEC_DIRS": str(generated), **SAN_ENV}
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    state = json.dumps({"ociVersion": "1.0.2", "id": "c", "pid": NO_PID, "bundle": str(bundle)}).encode()
    box = Box(tmp_path / "w", [generated])
    for doc in docs:
        r = subprocess.run([str(san / "xpu-cdi-hook"), "prestart"], input=doc, capture_output=True, timeout=60,
                           env=env)
        if clean(r, 0, 1):
            refusal(r.stderr.decode(errors="replace"), "xpu-cdi-hook")
        (bundle / "config.json").write_bytes(doc)
        r = subprocess.run([str(san / "xpu-cdi-hook"), "prestart"], input=state, capture_output=True, timeout=60,
                           env=env)
        if clean(r, 0, 1):
            refusal(r.stderr.decode(errors="replace"), "xpu-cdi-hook")
        for text in (doc + b' "cdi.k8s.io"', b'{"a":"cdi.k8s.io","x":' + doc + b"}"):
            create(san, box, text)


# -- YAML specs, spec dirs -----------------------------------------------------

def hostile_yaml() -> List[bytes]:
    rng = random.Random(11)
    spec = "".join(f"- name: '{i}'\n  containerEdits: &e{i}\n    env: [A={i}, B]\n"
                   f"    deviceNodes: [{{path: /dev/null}}]\n- name: c{i}\n  containerEdits: *e{i}\n"
                   for i in range(30)).encode()
    spec = f"cdiVersion: 0.6.0\nkind: {GPU}\ndevices:\n".encode() + spec
    docs = [b"a: 1\na: 2\n", b"<<: {a: 1}\n", b"a: !!binary aGk=\n", b"a: !vendor x\n", b"a: !!int x\n",
            b"a: .inf\n", b"a: 1\n---\nb: 2\n", b"a: *x\n", b"a: &x [1, *x]\n", b"? [1]\n: x\n", b"~: x\n",
            b"18446744073709551615: x\n", b"[" * 101, b"a: [\n", b"a: b\n\tc: d\n", b"a: '\xed\xa0\x80'\n",
            b'a: "\\ud800"\n', b"a: &a [" + b"*a, " * 10 + b"]", b"- " * 5000 + b"x", b"[" * 100_000,
            b"{a: " * 3000, b"&a " * 1000, b"a: '" + b"x" * 100_000, b"\xff\xfe" + "a: é\n".encode("utf-16-le"),
            b"\x00" * 64, b"%YAML 2.0\n--- a", b"{" + b",".join(b"k%d: %d" % (i, i) for i in range(20_000)) + b"}",
            b"? " * 500 + b"x", b"!<!> x",
            # a billion laughs: refused when the expanded tree reaches its node limit
            b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
                b"%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n" % ((98 + i, 98 + i) + (97 + i,) * 10)
                for i in range(8))]
    docs += [spec[:rng.randrange(len(spec))] for _ in range(30)]
    docs += [mutate(rng, spec) for _ in range(60)]
    return docs


def test_yaml_spec_hostile(san: Path, tmp_path: Path) -> None:
    """A hostile YAML spec beside a good one: the wrapper uses the good one (the bad one warned about) or
    refuses in one line; the hook likewise, with no report."""
    d = tmp_path / "cdi"
    write_json(d / "a.json", gpu_spec(["good"]))
    box = Box(tmp_path, [d])
    text = box.config([], {"cdi.k8s.io/x": f"{GPU}=good"})
    for doc in hostile_yaml():
        (d / "z.yaml").write_bytes(doc)
        create(san, box, text)
        assert box.ran() and b"GPU_good=1" in box.seen_config()


BROKEN = {
    "truncated": '{"cdiVersion": "0.6.0", "kind": "example.com/gpu", "devices": [',
    "not-object": "[]", "no-kind": {"cdiVersion": "0.6.0", "devices": []},
    "bad-kind": {"cdiVersion": "0.6.0", "kind": "gpu", "devices": []},
    "devices-not-list": {"cdiVersion": "0.6.0", "kind": GPU, "devices": {"a": 1}},
    "device-no-name": {"cdiVersion": "0.6.0", "kind": GPU, "devices": [{"containerEdits": {}}]},
    "bad-name": {"cdiVersion": "0.6.0", "kind": GPU, "devices": [{"name": "a/b", "containerEdits": {}}]},
    "edits-not-object": {"cdiVersion": "0.6.0", "kind": GPU, "devices": [{"name": "x", "containerEdits": 5}]},
    "env-not-strings": {"cdiVersion": "0.6.0", "kind": GPU, "devices": [{"name": "x", "containerEdits":
                                                                         {"env": [1, None]}}]},
    "nodes-odd": {"cdiVersion": "0.6.0", "kind": GPU, "devices": [{"name": "x", "containerEdits":
                                                                   {"deviceNodes": [{"major": "x"}, 5]}}]},
    "nan": '{"cdiVersion": "0.6.0", "kind": "example.com/gpu", "devices": [], "x": NaN}',
    "surrogate": '{"cdiVersion": "0.6.0", "kind": "example.com/gpu", "devices": [], "x": "\\ud800"}',
    "deep": '{"cdiVersion": "0.6.0", "kind": "example.com/gpu", "devices": [], "x": ' + "[" * 300 + "]" * 300 + "}",
    "huge-int": '{"cdiVersion": "0.6.0", "kind": "example.com/gpu", "devices": [], "x": ' + "1" * 700 + "}",
    "dup-key": '{"cdiVersion": "0.6.0", "kind": "example.com/gpu", "kind": "example.com/gpu", "devices": []}',
    "duplicate-device": gpu_spec(["0"]),
    "many-hooks": gpu_spec(["h"], {"hooks": [{"hookName": "createContainer", "path": f"/h{i % 7}",
                                              **{f"k{j}": j for j in range(70)}} for i in range(50)]}),
    "deep-hooks": gpu_spec(["d"], {"hooks": [{"hookName": "createContainer", "path": "/h",
                                              "x": json.loads("[" * 90 + "]" * 90)}] * 3}),
}


def test_broken_spec_dirs(san: Path, tmp_path: Path) -> None:
    """Every broken spec beside a good one, a FIFO spec, a spec dir that is a file, a missing and an odd dir:
    the good device still comes through the wrapper (the rest warned about, one line each), no report."""
    for name, content in BROKEN.items():
        d = tmp_path / name
        write_json(d / "good.json", gpu_spec(["0"]))
        write_json(d / "zz.json", content)
        box = Box(tmp_path / f"box-{name}", [d])
        for want in (f"{GPU}=0", f"{GPU}=0,{GPU}=h,{GPU}=d,{GPU}=0"):
            err = create(san, box, box.config([], {"cdi.k8s.io/x": want}))
            if want == f"{GPU}=0" and name != "duplicate-device":
                assert box.ran() and b"GPU_0=1" in box.seen_config(), (name, err)
            elif want == f"{GPU}=0":  # defined twice in one dir: both dropped, so unknown
                assert not box.ran() and "conflicting device" in err, err
    fifo = tmp_path / "fifo"
    write_json(fifo / "good.json", gpu_spec(["0"]))
    os.mkfifo(fifo / "zz.json")
    box = Box(tmp_path / "box-fifo", [fifo / "good.json", Path("/nonexistent"), Path("/proc/self/fd"), fifo])
    err = create(san, box, box.config([], {"cdi.k8s.io/x": f"{GPU}=0"}))
    assert box.ran() and "not a regular file" in err, err


# -- selection values and annotations ----------------------------------------

HOSTILE_VALUES = ["1," * 32767, "0-999999", "999999-0", "0-4095," * 200, "all," * 1000, "-" * 1000, "," * 65536,
                  "9" * 100, "1-" + "9" * 30, "1\u00001", "\u00a0" * 100, " \t\n\v\f\r" * 100, "0" * 65537,
                  "1\\u0000", "0,1,,2", "-1", "1-", "0x1", "GPU-" + "f" * 36, "ALL", "none", "void,1", "1-3,2-0"]


def test_selection_hostile(san: Path, tmp_path: Path, generated: Path) -> None:
    """Hostile selection values in env and annotations, through the wrapper and the hook (whose container
    does not exist: what it asks for is read, checked and resolved before that is found)."""
    box = Box(tmp_path, [generated])
    env = {"PATH": "/usr/bin:/bin", "XPU_CDI_SPEC_DIRS": str(generated), **SAN_ENV}
    configs = [box.config([f"{var}={v}"]) for var in ("CXPU_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES")
               for v in HOSTILE_VALUES]
    configs += [box.config([f"V{i}={i}" for i in range(10_000)] + ["CXPU_VISIBLE_DEVICES=1"]),
                box.config(["CXPU_VISIBLE_DEVICES=" + "1" * 70_000]),
                box.config([], {"cdi.k8s.io/" + "a" * 70: "x"}),
                box.config([], {"cdi.k8s.io/a": ",".join(["kunlunxin.com/xpu=1"] * 5000)}),
                box.config([], {f"cdi.k8s.io/k{i}": "a/b=c" for i in range(3000)}),
                box.config([], {"cdi.k8s.io/a\u0000b": "a/b=c", "cdi.k8s.io/b": "a/b=c\u0000"}),
                box.config([], {"cdi.k8s.io/a": "a/b=" + "c" * 100_000}),
                box.config([], {"cdi.k8s.io/a": "huawei.com/npu=1,kunlunxin.com/xpu=3"})]
    bundle = tmp_path / "hook-bundle"
    bundle.mkdir()
    state = json.dumps({"ociVersion": "1.0.2", "id": "c", "pid": NO_PID, "bundle": str(bundle)}).encode()
    for text in configs:
        create(san, box, text)
        (bundle / "config.json").write_bytes(text)
        r = subprocess.run([str(san / "xpu-cdi-hook"), "prestart"], input=state, capture_output=True, timeout=60,
                           env=env)
        if clean(r, 0, 1):
            refusal(r.stderr.decode(errors="replace"), "xpu-cdi-hook")


# -- config.json edits -----------------------------------------------------------

ODD_CONFIGS = [
    {}, {"linux": 5}, {"linux": {"devices": 5, "resources": []}}, {"linux": {"resources": {"devices": {}}}},
    {"mounts": "x"}, {"mounts": [5, None, {"destination": 5}]}, {"mounts": [{"destination": "/a/../../.."}] * 50},
    {"mounts": [{"destination": "/" + "x/" * 2000}, {"destination": ""}, {"destination": "//"}]},
    {"process": 7}, {"process": {"env": "x"}}, {"process": {"env": [1, None, "LD_LIBRARY_PATH=" + ":" * 5000]}},
    {"process": {"user": {"additionalGids": [1.5, -1, 2**70, "x"]}}}, {"hooks": {"prestart": 5, "poststop": [1]}},
    {"hooks": []}, {"x": [[[[[[]]]]]] * 100},
]
ODD_EDITS = [
    {"env": ["A=1"], "deviceNodes": [{"path": "/dev/null"}],
     "mounts": [{"hostPath": "/tmp", "containerPath": "/t", "options": ["ro", "bind"]}],
     "hooks": [{"hookName": "createContainer", "path": "/h", "args": ["h", "update-ldcache", "--folder", "/l"]}]},
    {"deviceNodes": [{"path": "/dev/x", "hostPath": "/dev/null"}, {"path": "/dev/y", "hostPath": "/nonexistent"},
                     {"path": "/dev/z", "type": "p"}, {"path": "rel"}, {"path": "/dev/\u0000"}]},
    {"deviceNodes": [{"path": "/dev/x", "major": 2**62, "minor": -1, "uid": 2**40, "permissions": "r" * 1000}]},
    {"deviceNodes": [{"path": "/dev/x", "major": 1.5, "minor": 1e3, "fileMode": 18446744073709551615}]},
    {"mounts": [{"hostPath": "/h", "containerPath": "/" + "d/" * 3000, "options": ["bind"] * 500},
                {"hostPath": "/h", "containerPath": "/a/./b/../c//", "type": ""}]},
    {"env": ["LD_LIBRARY_PATH=" + ":".join(f"/l{i}" for i in range(2000)), "=x", "A", "B=\u00e9"],
     "hooks": [{"hookName": "prestart", "path": "/h", "args": ["h", "update-ldcache"] + ["--folder"] * 99}]},
    {"hooks": [{"hookName": "bogus", "path": "/h"}, {"hookName": "prestart", "path": "rel"}]},
    {"hooks": [{"hookName": "prestart", "path": "/h", "timeout": 1}, {"hookName": "prestart", "path": "/h",
                                                                      "timeout": 1.0}]},
    {"additionalGids": list(range(3000)) + [2**40, -1]},
    {"intelRdt": {"closID": "x"}},
]


def test_wrapper_odd_edits(san: Path, tmp_path: Path) -> None:
    """Odd config.json shapes under odd edits: the runtime runs on the edited config, or one line says why
    and config.json is left as it was."""
    d = tmp_path / "cdi"
    box = Box(tmp_path, [d])
    write_json(d / "gpu.json", {"cdiVersion": "0.6.0", "kind": GPU, "devices": [
        {"name": str(i), "containerEdits": e} for i, e in enumerate(ODD_EDITS)]})
    cases = [(c, i % len(ODD_EDITS)) for i, c in enumerate(ODD_CONFIGS)]
    cases += [({}, i) for i in range(len(ODD_EDITS))]
    for config, e in cases:
        text = json.dumps({**config, "annotations": {"cdi.k8s.io/x": f"{GPU}={e}"}}).encode()
        err = create(san, box, text)
        if not box.ran():
            assert (box.bundle / "config.json").read_bytes() == text, err


# -- the hook ------------------------------------------------------------------

def hook_run(san: Path, state: bytes, *args: str, env: Optional[Dict[str, str]] = None,
             cwd: Optional[Path] = None) -> Tuple[subprocess.CompletedProcess, str]:
    r = subprocess.run([str(san / "xpu-cdi-hook"), *(args or ("prestart",))], input=state, capture_output=True,
                       timeout=60, cwd=cwd, env={"PATH": "/usr/bin:/bin", **SAN_ENV, **(env or {})})
    err = clean(r, 0, 1)  # answered (0), or refused in one line (1)
    assert r.returncode == 0 or (err.startswith("xpu-cdi-hook: ") and err.count("\n") == 1), err
    return r, err


def bundle_with(base: Path, config: Any) -> Path:
    b = base / f"b{len(list(base.iterdir()))}"
    b.mkdir()
    if config is not None:
        (b / "config.json").write_bytes(config if isinstance(config, bytes) else json.dumps(config).encode())
    (b / "rootfs").mkdir()
    return b


def test_hook_malformed_states_and_configs(san: Path, tmp_path: Path, generated: Path) -> None:  # noqa: F811
    """Each answered (nothing asked for: exit 0) or refused in one line (exit 1), no sanitizer report."""
    env = {"XPU_CDI_SPEC_DIRS": str(generated)}
    wants = {"process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}, "root": {"path": "rootfs"}}
    configs: List[Any] = [
        None, b"", b"{", b"[]", b"\x00", b"{}", {"root": 5}, {"root": {"path": ""}}, {"root": {"path": "a\u0000b"}},
        {"root": {"path": "../" * 2000}}, {"root": {"path": "/" * 5000}}, {"root": {"path": "r"}, "process": []},
        {"root": {"path": "r"}, "process": {"env": {"a": 1}}}, {"root": {"path": "r"}, "annotations": []},
        {"root": {"path": "r"}, "process": {"env": [f"K{i}=v" for i in range(20_000)]}},
        {"root": {"path": "r"}, "process": {"env": ["CXPU_VISIBLE_DEVICES=" + "1," * 30_000]}},
        {"root": {"path": "r"}, "annotations": {f"cdi.k8s.io/{i}": "x" for i in range(2000)}},
        b'{"root":{"path":"r"},"x":' + b"[" * 100_000, b'{"root":{"path":"r"},"pad":"' + b"x" * (3 << 20) + b'"}',
        dict(wants), dict(wants, root={"path": "/" + "r/" * 3000}),
    ]
    states: List[Any] = [b"", b" ", b"{", b"[]", b"null", b"\xff" * 100, b"{" * 100_000, b"x" * (2 << 20),
                         {"id": 1}, {"id": ""}, {"id": "a\u0000"}, {"id": "c", "bundle": "rel"},
                         {"id": "c", "bundle": "/\u0000"}, {"id": "c", "bundle": "/nonexistent"},
                         {"id": "c", "bundle": "/" + "x" * 10_000}]
    # pids no process has (over pid_max): an injection asked for defers before touching anything
    variants = [{"pid": -1}, {"pid": 2**40}, {"pid": 1.5}, {"pid": True}, {"pid": 1}, {"pid": NO_PID},
                {"pid": NO_PID, "annotations": {"cdi.k8s.io/a": "kunlunxin.com/xpu=2"}},
                {"root": "/x", "annotations": 7}]
    for s in states:
        hook_run(san, s if isinstance(s, bytes) else json.dumps(s).encode(), env=env)
    for config in configs:
        b = bundle_with(tmp_path, config)
        for extra in ({"pid": 0}, variants[len(list(tmp_path.iterdir())) % len(variants)]):
            hook_run(san, json.dumps({"id": "c", "bundle": str(b), **extra}).encode(), env=env)
    ok = json.dumps({"id": "c", "bundle": str(bundle_with(tmp_path, {"root": {"path": "r"}})), "pid": 0}).encode()
    for args in ([], ["prestart", "--log"], ["--log=", "prestart"], ["prestart", "x"],
                 ["--spec-dir="] * 70 + ["prestart"],
                 ["--spec-dir", "/nonexistent", "--spec-dir=/proc/self/fd", "prestart"], ["update-ldcache"],
                 ["prestart", "--log", str(tmp_path)], ["\u00e9" * 1000]):
        hook_run(san, ok, *args, env=env)
    hook_run(san, ok, env={"XPU_CDI_SPEC_DIRS": ":" * 10_000 + str(generated) + ":x" * 200})
    # with fds 0, 1 and 2 closed
    r = subprocess.run(["sh", "-c", 'exec "$0" prestart <&- >&- 2>&-', str(san / "xpu-cdi-hook")],
                       capture_output=True, env={"PATH": "/usr/bin:/bin", **SAN_ENV}, timeout=60)
    clean(r, 1)  # no state to read


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Tuple[int, bool]]:
    """A sleeping process in a private mount namespace of its own (the hook joins it and mounts there: the
    mounts go with it), in a fresh v1 devices cgroup that denies all when this machine has one.
    Yields (pid, whether device nodes may be asked for: only with that cgroup)."""
    cg = None
    if (V1_DEVICES / "devices.allow").exists():
        cg = V1_DEVICES / runtimes.unique("xpu-cdi-san")
        cg.mkdir()
        (cg / "devices.deny").write_text("a")
        argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cg)]
    else:
        argv = []
    p = subprocess.Popen([*argv, "unshare", "-m", "--propagation", "private", "sleep", "60"])
    try:
        runtimes.wait_for_exec(p, "sleep")
        yield p.pid, cg is not None
    finally:
        p.kill()
        p.wait(timeout=10)
        if cg is not None:
            remove_cgroup(cg)


def remove_cgroup(d: Path) -> None:
    """Kill what is left in d (only the process this test put there), then remove it."""
    for _ in range(100):
        for pid in (d / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            d.rmdir()
            return
        except OSError:
            time.sleep(0.05)
    d.rmdir()


def tree(root: Path) -> List[str]:
    return sorted(f"{p.relative_to(root)} {oct(p.lstat().st_mode)}" for p in root.rglob("*"))


@pytest.mark.privileged
@pytest.mark.parametrize("fail_late", [False, True], ids=["injected", "rolled-back"])
def test_hook_whole_injection(san: Path, tmp_path: Path, container: Tuple[int, bool], fail_late: bool) -> None:
    """A whole injection by the sanitized hook into a busybox rootfs (nodes when a v1 devices cgroup can be
    made, bind mounts of a dir and a file, links, the image's ldconfig), and the same with a link that
    conflicts last: everything taken back, then one line saying what failed."""
    pid, nodes = container
    host = tmp_path / "host"
    (host / "lib").mkdir(parents=True)
    (host / "lib" / "libx.so").write_text("x\n")
    for p in (host, host / "lib", host / "lib" / "libx.so"):
        os.chown(p, 0, 0)
        p.chmod(0o755 if p.is_dir() else 0o644)
    rootfs = runtimes.make_rootfs(tmp_path / "bundle" / "rootfs")
    (rootfs / "sbin" / "ldconfig").write_text('#!/bin/sh\necho "$@" > /ldconfig.args\n')
    (rootfs / "sbin" / "ldconfig").chmod(0o755)
    if fail_late:
        (rootfs / "opt" / "links").mkdir(parents=True)
        (rootfs / "opt" / "links" / "b").write_text("the image's\n")
    edits: Dict[str, Any] = {
        "mounts": [{"hostPath": str(host / "lib"), "containerPath": "/opt/lib", "options": ["ro", "nosuid", "bind"]},
                   {"hostPath": str(host / "lib" / "libx.so"), "containerPath": "/opt/one/libx.so",
                    "type": "bind"}],
        "hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                   "args": ["xpu-cdi-hook", "create-symlinks", "--link", "libx.so::/opt/links/a",
                            "--link=/opt/lib/libx.so::/opt/links/b"]},
                  {"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                   "args": ["xpu-cdi-hook", "update-ldcache", "--folder", "/opt/lib"]}],
        "env": ["A=1"]}
    if nodes:
        edits["deviceNodes"] = [{"path": "/dev/x0", "type": "c", "major": 240, "minor": 0, "fileMode": 0o640},
                                {"path": "/dev/sub/x1", "hostPath": "/dev/null", "permissions": "rw"}]
    specs = tmp_path / "cdi"
    write_json(specs / "x.json", {"cdiVersion": "0.7.0", "kind": "example.com/san",
                                      "devices": [{"name": "a", "containerEdits": edits}]})
    b = rootfs.parent
    (b / "config.json").write_text(json.dumps({"root": {"path": "rootfs"},
                                               "annotations": {"cdi.k8s.io/x": "example.com/san=a"}}))
    before = tree(rootfs)
    log = tmp_path / "log"
    r, err = hook_run(san, json.dumps({"id": "san", "pid": pid, "bundle": str(b)}).encode(), "prestart", "--log",
                      str(log), env={"XPU_CDI_SPEC_DIRS": str(specs)}, cwd=tmp_path)
    lines = log.read_text().splitlines()
    if not fail_late:
        assert r.returncode == 0 and "injected example.com/san=a: " in lines[-1], (err, lines)
        assert f"{2 if nodes else 0} node(s)" in lines[-1] and "2 mount(s)" in lines[-1], lines
        assert (rootfs / "ldconfig.args").read_text() == "/opt/lib\n"
        assert os.readlink(rootfs / "opt" / "links" / "b") == "/opt/lib/libx.so"
    else:
        assert r.returncode == 1 and "already exists in the container" in err, (err, lines)
        assert lines[-1].endswith(err.strip()[len("xpu-cdi-hook: "):]), (err, lines)
        assert tree(rootfs) == before
    assert os.stat("/proc/self/ns/mnt").st_ino != os.stat(f"/proc/{pid}/ns/mnt").st_ino  # the hook went there
    assert not any(str(rootfs) in line for line in Path("/proc/self/mountinfo").read_text().splitlines())



# -- the wrapper -----------------------------------------------------------------

def test_wrapper_odd_argv_and_configs(san: Path, tmp_path: Path, generated: Path) -> None:
    """Every run ends in the fake runtime or one line (exit 1), the config edited where it should."""
    box = Box(tmp_path, [generated])
    bundle = str(box.bundle)
    for args in ([], ["--"], ["create"], ["--root"], ["--root", "/r", "--log"], ["create", "--bundle"],
                 ["create", "-b", "/nonexistent", "c1"], ["run", "--bundle=", "c1"], ["-b", bundle],
                 ["state", "x" * 100_000], ["create", "--bundle=" + "/" * 5000, "c"], ["\u00e9" * 100, "create"]):
        wrapper_run(san, box, *args)
    configs: List[Tuple[Any, bool]] = [
        (b"", False), (b"{", False), (b"[]", False), (b'"cdi.k8s.io"', False), (b"\x00cdi.k8s.io", False),
        (b'{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"n":1e400}', False),
        (b'{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"x":' + b"[" * 300 + b"]" * 300 + b"}", False),
        (b'{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"pad":"' + b"x" * (3 << 20) + b'"}', False),
        (b'{"process":{"env":["CXPU_VISIBLE_DEVICES=' + b"0-3," * 10_000 + b'"]}}', False),  # a last empty token
        (b'{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"linux":{"devices":7}}', False),
        (b'{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"mounts":[{"destination":"/a"}],"mounts":[]}',
         False),  # a duplicate key: refused
        (box.config(["CXPU_VISIBLE_DEVICES=0-3"], {"cdi.k8s.io/a": "kunlunxin.com/xpu=nine"}), False),  # no such device
        (box.config(["CXPU_VISIBLE_DEVICES=0-3"], {"cdi.k8s.io/a": "kunlunxin.com/xpu=3"}), True),
        (box.config([], {"cdi.k8s.io/a": "kunlunxin.com/xpu=1," * 2000 + "kunlunxin.com/xpu=2"}), True),
    ]
    for text, edited in configs:
        (box.bundle / "config.json").write_bytes(text)
        err = wrapper_run(san, box, "--root", "/r", "create", "--bundle", bundle, "c1")
        after = (box.bundle / "config.json").read_bytes()
        assert box.ran() or err.startswith("xpu-container-runtime: "), err
        if edited:
            assert after != text and "/dev/xpu" in after.decode(), err
        assert not [p.name for p in box.bundle.iterdir() if "xpu-cdi-tmp" in p.name]
    (box.bundle / "config.json").unlink()
    (box.bundle / "config.json").mkdir()
    wrapper_run(san, box, "create", "-b", bundle, "c1")
    wrapper_run(san, box, "create", "c1", cwd=box.bundle)
    for extra in ({"XPU_CDI_WRAPPER_ACTIVE": "1"}, {"XPU_CDI_RUNTIME": "/nonexistent"},
                  {"XPU_CDI_RUNTIME": str(san / "xpu-container-runtime")},
                  {"XPU_CDI_RUNTIME": "no-such-runtime", "PATH": ""},
                  {"XPU_CDI_RUNTIME": "x", "PATH": ":" * 5000 + "/nonexistent/" * 300},
                  {"XPU_CDI_SPEC_DIRS": ":" * 10_000}):
        err = wrapper_run(san, box, "state", "c1", env=extra)
        assert box.ran() or err.startswith("xpu-container-runtime: "), (extra, err)
    # with fds 0, 1 and 2 closed: the edited config is still written (a temp file may be fd 0 to 2)
    (box.bundle / "config.json").rmdir()
    text = box.config(["CXPU_VISIBLE_DEVICES=1"])
    r = subprocess.run(["sh", "-c", 'exec "$0" create -b "$1" c1 <&- >&- 2>&-', str(san / "xpu-container-runtime"),
                        bundle], capture_output=True, env={**box.env, **SAN_ENV}, timeout=60)
    clean(r)
    assert box.ran() and (box.bundle / "config.json").read_bytes() != text and b"/dev/xpu1" in box.seen_config()
