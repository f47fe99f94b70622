"""The compiled front end under AddressSanitizer and UBSan, on hostile input.

The three binaries are built once per test session from build.py's own
source lists with ``-fsanitize=address,undefined -fno-sanitize-recover=all``
and fed what a pod controls (config.json, the OCI state's annotations), what
an image controls (the rootfs) and what an admin might get wrong (spec
dirs, argv): deeply nested, truncated and random JSON, invalid UTF-8, huge
numbers; selection values, annotations and broken spec files; mount tables;
odd config.json edits; the hook on malformed states and configs and through
a whole injection and its rollback; the wrapper on odd argv and configs.

A sanitizer report ends the process with exit code 99 (ASan) or 98 (UBSan);
every run here asserts the code it expects and that stderr holds no report.
Leaks are not checked: the front end never frees, by design (common.h).
Where the other tests of tests/native have input generators and drivers,
they are imported, not copied (their differential checks come along).  The
hook and the wrapper get a stub ``<binary>.py`` that exits 0, so a deferral
needs no Python and shows on stderr.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import random
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtimes
import test_fast_cgroup as tcg
import test_fast_ociedit as toe
import test_fjson as tfj
import test_fyaml as tfy
import test_request as trq
import test_wrapper_fast as twr
import xpu_cdi._native
from test_request import generated  # noqa: F401 (a fixture: the specs `xpu-cdi generate` writes)

BUILD_PY = Path(xpu_cdi._native.__file__).resolve().parent / "fast" / "build.py"
SAN_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-O1", "-g"]
ASAN_EXIT, UBSAN_EXIT = 99, 98
SAN_ENV = {"ASAN_OPTIONS": f"detect_leaks=0:abort_on_error=0:exitcode={ASAN_EXIT}",
           "UBSAN_OPTIONS": f"print_stacktrace=1:halt_on_error=1:exitcode={UBSAN_EXIT}"}
NO_PID = (1 << 22) + 7  # above the largest pid_max: never a process
REPORTS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: UndefinedBehaviorSanitizer")
# the Python half, for deferrals: says where it was started (mount namespace, cwd, umask)
TARGETS = ("xpu-cdi-fast-test", "xpu-cdi-hook", "xpu-container-runtime")
SETTINGS = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
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


def load_build() -> Any:
    if not BUILD_PY.exists():
        pytest.skip(f"no front end sources at {BUILD_PY.parent} (an installed package, not a checkout)")
    spec = importlib.util.spec_from_file_location("xpu_cdi_fast_build", BUILD_PY)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def san_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sanitized binaries with stub Python halves beside the hook and the wrapper, and a canary: built
    once per test session, in the session's temp dir that xdist's workers share (under a lock: the
    first worker builds, the other waits for it)."""
    build = load_build()
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    d = shared / "fast-sanitized"
    with open(shared / "fast-sanitized.lock", "w") as lock:
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
                with ThreadPoolExecutor(len(TARGETS)) as pool:  # one compiler per target: both cores busy
                    list(pool.map(lambda t: build.build(str(d), [t], extra_cflags=SAN_FLAGS), TARGETS))
                (d / "built").write_text("")
    why = (d / "built").read_text()
    if why:
        pytest.skip(why)
    return d


@pytest.fixture(scope="module")
def san(san_build: Path) -> Iterator[Path]:
    """san_build, with the sanitizer options in os.environ meanwhile (the drivers imported from the other
    tests run the binaries with the inherited environment)."""
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


def test_the_sanitizers_report(san: Path) -> None:
    """The harness sees a report: a heap overflow and a signed overflow in a canary built the same way."""
    heap = subprocess.run([str(san / "canary"), "heap"], capture_output=True, text=True)
    ub = subprocess.run([str(san / "canary"), "ub"], capture_output=True, text=True)
    assert heap.returncode == ASAN_EXIT and "heap-buffer-overflow" in heap.stderr, heap
    assert ub.returncode == UBSAN_EXIT and "signed integer overflow" in ub.stderr, ub
    clean(subprocess.run([str(san / "canary")], capture_output=True))
    nm = subprocess.run(["nm", "-D", str(san / "xpu-cdi-hook")], capture_output=True, text=True)
    assert nm.returncode != 0 or "__asan_init" in nm.stdout or "__asan" in nm.stdout, "not an ASan build"


# -- JSON ----------------------------------------------------------------------

def hostile_json() -> List[bytes]:
    rng = random.Random(5)
    big = json.dumps(tfj.config_json(300_000)).encode()
    docs = [
        b'{"a":' * 255 + b"[]" + b"}" * 255, b'{"a":' * 256 + b"1" + b"}" * 256, b"[{" * 128 + b"}]" * 128,
        b"[" * 257, b'{"' * 300, b'"' + b"\\u0000" * 20000 + b'"', b'"' + b"\\ud83d\\ude00" * 50000 + b'"',
        b'"' + b"\\ud83d" * 3 + b'"', b'"\\ud83d\\u', b'"\\ud83d\\', b'"\\u00', b'"' + bytes(range(0x80, 0x100)) + b'"',
        b'"' + b"\xf0\x9f\x98" + b'"', b'"\xf4\x90\x80\x80"', b"1e999999999999999999999", b"-1e-999999999",
        b"0." + b"0" * 100_000 + b"1", b"-" + b"9" * 640, b"9" * 640 + b"e1", b"[" + b"-0," * 50_000 + b"0]",
        b"{" + b",".join(b'"k":%d' % i for i in range(20_000)) + b"}", b" " * (1 << 20) + b"null",
        b"[" + b",".join([b"{}"] * 100_000) + b"]", b'{"":' + b'""' + b"}", b"\xef\xbb\xbf", b"\x00" * 64,
    ]
    docs += [big[:rng.randrange(len(big))] for _ in range(40)]  # truncations
    docs += [tfj.mutate(rng, big) for _ in range(20)]
    docs += [bytes(rng.randrange(256) for _ in range(rng.randrange(200))) for _ in range(200)]
    return docs


def test_json_hostile_documents(san: Path) -> None:
    """Parse (differentially, as test_fjson does), compare, look up, escape and edit hostile documents."""
    exe = san / "xpu-cdi-fast-test"
    docs = tfj.EXPLICIT + hostile_json()
    tfj.check_parse(exe, docs)
    small = [d for d in docs if len(d) < 4096]
    pairs = [f for i in range(0, len(small) - 1) for f in (small[i], small[i + 1])]
    assert len(tfj.run(exe, "equal", pairs)) == len(pairs) // 2
    keys = [b"", b"a", b"k", b"\x00", b"\xff", b"a" * 10000]
    assert len(tfj.run(exe, "get", [f for d in small for f in (d, keys[len(d) % len(keys)])])) == len(small)
    blobs = [d.replace(b"\x00", b"") for d in small]
    assert len(tfj.run(exe, "escape", blobs)) == len(blobs)
    scripts = [b'[["remove",[],18446744073709551615]]', b'[["insert",[],-1,"1"]]', b'[["set",[0,"x",99],"k","1"]]',
               b'[["set_int",[],"k",1e400]]', b'[["append",[],"[[[["]]', b'[["new",[],"k","bogus"]]',
               b'[["object_at",["a","b"],"c"]]', b'[["remove",[],0],["remove",[],0],["remove",[],0]]', b"[[]]",
               b'[["set_str",[],"\\u0000","\\u0000"]]', b"[" + b'["append",[],"{}"],' * 5000 + b'["remove",[],0]]']
    targets = [b"[]", b"{}", b'{"a":{"b":[1,2]}}', b"[1,2,3]", b"7"]
    frames = [f for t in targets for s in scripts for f in (t, s)]
    assert len(tfj.run(exe, "edit", frames)) == len(frames) // 2


@SETTINGS
@given(st.lists(tfj.TREES, min_size=10, max_size=10), tfj.SEEDED,
       st.lists(st.lists(st.sampled_from(tfj.TOKENS), max_size=16).map(b"".join), min_size=100, max_size=100))
def test_json_generated_and_mutated(san: Path, trees: List[Any], rng: random.Random, tokens: List[bytes]) -> None:
    raw = [d.encode("utf-8", "surrogatepass") for d in tfj.json_texts(trees, rng)]
    for _ in range(3):
        raw = [tfj.mutate(rng, d) for d in raw] + raw
    tfj.check_parse(san / "xpu-cdi-fast-test", raw + tokens)


def test_yaml_hostile_documents(san: Path) -> None:
    """The YAML loader on everything test_fyaml refuses, alias bombs, deep and wide
    documents, truncations and byte flips of a spec: one line each, no report."""
    exe = san / "xpu-cdi-fast-test"
    rng = random.Random(11)
    spec = "".join(f"- name: '{i}'\n  containerEdits: &e{i}\n    env: [A={i}, B]\n"
                   f"    deviceNodes: [{{path: /dev/x{i}}}]\n- name: c{i}\n  containerEdits: *e{i}\n"
                   for i in range(50)).encode()
    spec = b"cdiVersion: 0.6.0\nkind: a.b/c\ndevices:\n" + spec
    docs = [d.encode("latin-1") for d, _ in tfy.REFUSED] + [f"v: {t}".encode() for t, _ in tfy.SCALARS]
    docs += [b"a: &a [" + b"*a, " * 10 + b"]", b"- " * 5000 + b"x", b"[" * 100_000, b"{a: " * 3000, b"&a " * 1000,
             b"a: " + b"'" + b"x" * 100_000, b"\xff\xfe" + "a: é\n".encode("utf-16-le"), b"\x00" * 64,
             b"%YAML 2.0\n--- a",
             b"{" + b",".join(b"k%d: %d" % (i, i) for i in range(20_000)) + b"}", b"? " * 500 + b"x", b"!<!> x"]
    docs += [spec[:rng.randrange(len(spec))] for _ in range(40)]
    docs += [tfj.mutate(rng, spec) for _ in range(100)]
    for mode in ("yaml", "cdiyaml"):
        lines = tfj.run(exe, mode, docs)
        assert len(lines) == len(docs) and all(line.startswith(("OK ", "ERR ")) for line in lines)


# -- selection, annotations, spec dirs ---------------------------------------

HOSTILE_VALUES = ["1," * 32767, "0-999999", "999999-0", "0-4095," * 200, "all," * 1000, "-" * 1000, "," * 65536,
                  "9" * 100, "1-" + "9" * 30, "\x00", "1\x001", "\u00a0" * 100, " \t\n\v\f\r" * 100,
                  "0" * 65537, "1\\u0000"]


@pytest.fixture(scope="module")
def spec_dirs(tmp_path_factory: pytest.TempPathFactory, generated: Path) -> Iterator[List[Path]]:  # noqa: F811
    """The generated specs, then a hand-written kind (test_request's) with a big index."""
    d = tmp_path_factory.mktemp("san-specs")
    trq.write_json(d / "gpu.json", trq.spec(trq.GPU, trq.gpu_devices(["a", "b", "c", "d"]), {"env": ["S=1"]}))
    trq.write_json(d / "gpu.json.xpu-cdi", trq.index(trq.GPU, ["GPU_DEVS", "GPU_DEVS2"],
                                                     {str(i): "abcd"[i % 4] for i in range(5000)}))
    yield [generated, d]
    shutil.rmtree(d)


def test_requests_hostile(san: Path, spec_dirs: List[Path]) -> None:
    """test_request's edge cases and annotation cases, plus hostile values, one process (differential)."""
    cases = [trq.case(env) for env, _ in trq.COMMON]
    cases += [trq.case([f"{var}={v}"]) for var in ("CXPU_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES", "GPU_DEVS")
              for v in trq.SELECTION_EDGES + HOSTILE_VALUES]
    cases += [trq.case(["CXPU_VISIBLE_DEVICES=3"], s, c) for s, c, _ in trq.ANNOTATION_CASES]
    cases += [trq.case([f"V{i}={i}" for i in range(10_000)] + ["CXPU_VISIBLE_DEVICES=1"]),
              trq.case(["CXPU_VISIBLE_DEVICES=" + "1" * 70_000]),
              trq.case(None, {"cdi.k8s.io/" + "a" * 70: "x"}, {"cdi.k8s.io/a": ",".join(["kunlunxin.com/xpu=1"] * 5000)}),
              trq.case(None, None, {f"cdi.k8s.io/k{i}": "a/b=c" for i in range(3000)}),
              trq.case(None, None, {"cdi.k8s.io/a\u0000b": "a/b=c", "cdi.k8s.io/b": "a/b=c\u0000"}),
              trq.case(None, None, {"cdi.k8s.io/a": "a/b=" + "c" * 100_000})]
    trq.check_requested(san / "xpu-cdi-fast-test", spec_dirs, cases)
    # and with the dirs broken: a file, a missing dir, a dir of odd entries
    assert len(trq.run(san / "xpu-cdi-fast-test", ["requested", str(spec_dirs[1] / "gpu.json"), "/nonexistent",
                                                  "/proc/self/fd"], json.dumps(cases[0]) + "\n")) == 1


@SETTINGS
@given(st.lists(trq.cases, min_size=20, max_size=60))
def test_requests_generated(san: Path, spec_dirs: List[Path], batch: List[Dict[str, Any]]) -> None:
    trq.check_requested(san / "xpu-cdi-fast-test", spec_dirs, batch)


def test_resolve_broken_spec_dirs(san: Path, tmp_path: Path, generated: Path) -> None:  # noqa: F811
    """Every broken spec, odd field and JSON-only-Python case of test_request, a FIFO, a spec dir that is a file,
    and the YAML specs generate writes: each resolve answers (the broken file reported) or refuses, without a
    sanitizer report."""
    exe = san / "xpu-cdi-fast-test"
    good = trq.spec(trq.GPU, trq.gpu_devices(["0"]))
    cases: Dict[str, Any] = {f"broken-{k}": v for k, v in trq.BROKEN.items()}
    cases.update({f"field-{k}": trq.spec(trq.GPU, {"1": v}) for k, v in trq.FIELD_CASES.items()})
    cases.update({f"odd-{i}": json.dumps(trq.spec(trq.GPU, trq.gpu_devices(["9"])))[:-1] + f', "x": {x}}}'
                  for i, x in enumerate(["NaN", '"\\ud800"', "[" * 300 + "]" * 300, "1" * 700, "1e400"])})
    cases["deep-edits"] = trq.spec(trq.GPU, {"1": {"hooks": [{"hookName": "h", "path": "/h", "x": json.loads(
        "[" * 200 + "]" * 200)}] * 3}})
    cases["many-hooks"] = trq.spec(trq.GPU, {"1": {"hooks": [{"hookName": "h", "path": f"/h{i % 7}",
                                                             **{f"k{j}": j for j in range(70)}} for i in range(50)]}})
    for name, content in cases.items():
        d = tmp_path / name
        trq.write_json(d / "good.json", good)
        trq.write_json(d / "zz.json", content)
        for names in ([f"{trq.GPU}=0"], [f"{trq.GPU}=1", f"{trq.GPU}=0", f"{trq.GPU}=1"]):
            if name.startswith(("odd-", "deep-")):  # JSON only Python's json module takes: reported by the binaries
                trq.c_resolve(exe, [d], names)
            else:
                trq.check_resolve(exe, [d], names)
    fifo = tmp_path / "fifo"
    trq.write_json(fifo / "good.json", good)
    os.mkfifo(fifo / "zz.json")
    got = trq.c_resolve(exe, [fifo], [f"{trq.GPU}=0"])
    assert not trq.deferred(got) and got["problems"] == [f"spec '{fifo}/zz.json': not a regular file"], got
    assert trq.deferred(trq.c_resolve(exe, [fifo / "good.json"], [f"{trq.GPU}=0"]))
    trq.check_resolve(exe, [generated], ["huawei.com/npu=1", "huawei.com/npu=3"], answer=True)


# -- cgroup locate -------------------------------------------------------------

def hostile_mount_tables() -> List[Tuple[str, str]]:
    long_path = "/" + "a\\040" * 5000
    lines = "".join(f"{i} 1 0:{i} / /sys/fs/cgroup/c{i} rw - cgroup cgroup rw,devices\n" for i in range(20_000))
    return [
        ("1 2 0:1 " + long_path + " /c rw - cgroup c rw,devices\n", "5:devices:" + long_path + "\n"),
        ("1 2 0:1 / /c\\ rw - cgroup c rw,devices\n", "5:devices:/x\n"),
        ("1 2 0:1 /\\1 /c\\12 rw - cgroup2 c rw\n", "0::/\\1\n"),
        ("1 2 0:1 /\\777 /c rw - cgroup2 c rw\n", "0::/\n"),
        ("1 2 0:1 / /c rw - cgroup c rw,devices\x00\n", "5:devices:/\x00\n"),
        ("1 2 0:1 / /c rw - cgroup c " + ",".join(["devices"] * 10_000) + "\n", "5:devices:/\n"),
        (" - " * 1000 + "\n", ":" * 1000 + "\n"),
        ("\n" * 10_000, "\n" * 10_000),
        (lines, "".join(f"{i}:devices:/p{i}\n" for i in range(5000))),
        ("1 2 0:1 / /sys/fs/cgroup rw - cgroup2 c rw\n", "0::" + "/x" * 100_000 + "\n"),
        ("x" * 100_000, "y" * 100_000),
        ("1 2 0:1 / /c rw - cgroup c rw,devices", "5:devices:/a"),  # no final newlines
        ("", ""),
    ]


def test_cgroup_locate_hostile(san: Path) -> None:
    """test_fast_cgroup's fixtures and this machine (differential), then hostile tables (answered or declined)."""
    cases = list(tcg.FIXTURES.values())
    cases.append((Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text()))
    tcg.check_same(cases, tcg.run_batch(san, cases))
    for got in tcg.run_batch(san, hostile_mount_tables()):
        assert isinstance(got, tuple) or got.startswith("DEFER "), got


@SETTINGS
@given(st.lists(st.tuples(tcg.mountinfo_st, tcg.cgroups_st), min_size=20, max_size=40))
def test_cgroup_locate_generated(san: Path, cases: List[Tuple[str, str]]) -> None:
    tcg.check_same(cases, tcg.run_batch(san, cases))


# -- ociedit -------------------------------------------------------------------

ODD_CONFIGS = [
    {}, {"linux": 5}, {"linux": {"devices": 5, "resources": []}}, {"linux": {"resources": {"devices": {}}}},
    {"mounts": "x"}, {"mounts": [5, None, {"destination": 5}]}, {"mounts": [{"destination": "/a/../../.."}] * 50},
    {"mounts": [{"destination": "/" + "x/" * 2000}, {"destination": ""}, {"destination": "//"}]},
    {"process": 7}, {"process": {"env": "x"}}, {"process": {"env": [1, None, "LD_LIBRARY_PATH=" + ":" * 5000]}},
    {"process": {"user": {"additionalGids": [1.5, -1, 2**70, "x"]}}}, {"hooks": {"prestart": 5, "poststop": [1]}},
    {"hooks": []}, {"annotations": {"cdi.k8s.io/x": 1}}, {"x": [[[[[[]]]]]] * 100},
]
ODD_TEXTS = ['{"linux":{"devices":[]},"linux":7}', '{"mounts":[],"mounts":{"a":1},"mounts":[]}', '{"n":1e400}',
             '{"process":{"env":["A=\\u0000"]}}', '{"a":' * 250 + "1" + "}" * 250, "[]", '"x"', "{", ""]
ODD_EDITS = [
    toe.edits(),
    {"deviceNodes": [{"path": "/dev/x", "hostPath": "/dev/null"}, {"path": "/dev/y", "hostPath": "/nonexistent"},
                     {"path": "/dev/z", "type": "p"}, {"path": "rel"}, {"path": "/dev/\u0000"}]},
    {"deviceNodes": [{"path": "/dev/x", "major": 2**62, "minor": -1, "uid": 2**40, "permissions": "r" * 1000}]},
    {"mounts": [{"hostPath": "/h", "containerPath": "/" + "d/" * 3000, "options": ["bind"] * 500},
                {"hostPath": "/h", "containerPath": "/a/./b/../c//", "type": ""}]},
    {"env": ["LD_LIBRARY_PATH=" + ":".join(f"/l{i}" for i in range(2000)), "=x", "A", "B=\u00e9"],
     "hooks": [{"hookName": "prestart", "path": "/h", "args": ["h", "update-ldcache"] + ["--folder"] * 99}]},
    {"hooks": [{"hookName": "bogus", "path": "/h"}, {"hookName": "prestart", "path": "rel"}]},
    {"additionalGids": list(range(3000))},
]


def answered_as_python(exe: Path, tmp: Path, config: Any, e: Dict[str, Any], text: Optional[str] = None) -> None:
    """C's apply either defers (always allowed here: these inputs are odd on purpose) or gives Python's result."""
    got = toe.c_apply(exe, tmp, text if text is not None else config, e)
    if isinstance(got, tuple):
        assert got[0] == toe.DEFER, got
        return
    want = toe.py_apply(json.loads(text) if text is not None else config, e)
    assert not isinstance(want, tuple), f"C answered where Python refuses: {want[1]}"
    assert got == want


def test_ociedit_apply_odd_configs(san: Path, tmp_path: Path) -> None:
    """apply on odd configs and edits, each with every edit set in one run."""
    exe = san / "xpu-cdi-fast-test"
    for i, config in enumerate(ODD_CONFIGS):
        answered_as_python(exe, tmp_path, config, ODD_EDITS[i % len(ODD_EDITS)])
    for e in ODD_EDITS:
        answered_as_python(exe, tmp_path, toe.base_config(), e)
    for text in ODD_TEXTS:
        try:
            json.loads(text)
        except ValueError:
            assert toe.c_apply(exe, tmp_path, text, ODD_EDITS[0])[0] == toe.DEFER
            continue
        answered_as_python(exe, tmp_path, None, ODD_EDITS[0], text=text)


@SETTINGS
@given(config=toe._config, e=toe._edits)
def test_ociedit_apply_generated(san: Path, tmp_path: Path, config: Dict[str, Any], e: Dict[str, Any]) -> None:
    toe.check_same(san / "xpu-cdi-fast-test", tmp_path, config, e)


def test_ociedit_argv_and_files(san: Path, tmp_path: Path) -> None:
    exe = san / "xpu-cdi-fast-test"
    for args in ([], ["--"], ["--root"], ["--root", "--", "-b"], ["-b"], ["create", "--bundle"], ["--bundle="],
                 ["--log-format", "json", "--", "--", "create"], ["x" * 100_000, "-b=" + "y" * 100_000]):
        clean(subprocess.run([str(exe), "ociedit", "split", *args], capture_output=True))
    (tmp_path / "c.json").write_bytes(b'"' + b"\\" * 100_000 + b"CXPU_VISIBLE_DEVICES=" + b'"' * 1000)
    clean(subprocess.run([str(exe), "ociedit", "may-request", str(tmp_path / "c.json"), str(tmp_path),
                          "/nonexistent", "/proc/self/fd"], capture_output=True))
    for bundle in ("/nonexistent", str(tmp_path / "c.json"), "/", "x" * 5000, str(tmp_path)):
        clean(subprocess.run([str(exe), "ociedit", "prepare", bundle], capture_output=True,
                             env={**os.environ, "XPU_CDI_SPEC_DIRS": str(tmp_path)}))
    clean(subprocess.run([str(exe), "ociedit", "write", str(tmp_path / "no" / "dir"), "644", str(tmp_path / "c.json")],
                         capture_output=True))


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
                {"pid": NO_PID, "annotations": {"cdi.k8s.io/a": "kunlunxin.com/xpu=2"}}, {"root": "/x", "annotations": 7}]
    for s in states:
        hook_run(san, s if isinstance(s, bytes) else json.dumps(s).encode(), env=env)
    for config in configs:
        b = bundle_with(tmp_path, config)
        for extra in ({"pid": 0}, variants[len(list(tmp_path.iterdir())) % len(variants)]):
            hook_run(san, json.dumps({"id": "c", "bundle": str(b), **extra}).encode(), env=env)
    ok = json.dumps({"id": "c", "bundle": str(bundle_with(tmp_path, {"root": {"path": "r"}})), "pid": 0}).encode()
    for args in ([], ["prestart", "--log"], ["--log=", "prestart"], ["prestart", "x"], ["--spec-dir="] * 70 + ["prestart"],
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
    if (tcg.V1_DEVICES / "devices.allow").exists():
        cg = tcg.V1_DEVICES / runtimes.unique("xpu-cdi-san")
        cg.mkdir()
        (cg / "devices.deny").write_text("a")
        argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cg)]
    else:
        argv = []
    p = subprocess.Popen([*argv, "unshare", "-m", "--propagation", "private", "sleep", "60"])
    try:
        for _ in range(500):
            try:
                if Path(f"/proc/{p.pid}/comm").read_text().strip() == "sleep":
                    break
            except OSError:
                pass
            time.sleep(0.01)
        yield p.pid, cg is not None
    finally:
        p.kill()
        p.wait(timeout=10)
        if cg is not None:
            tcg.remove_cgroup(cg)


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
    trq.write_json(specs / "x.json", {"cdiVersion": "0.7.0", "kind": "example.com/san",
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

def wrapper_run(san: Path, box: "twr.Box", *args: str, env: Optional[Dict[str, str]] = None,
                cwd: Optional[Path] = None) -> str:
    for p in box.record.iterdir():
        p.unlink()
    r = subprocess.run([str(san / "xpu-container-runtime"), *args], input=b"", capture_output=True, timeout=60,
                       cwd=cwd, env={**box.env, **SAN_ENV, **(env or {})})
    err = clean(r, 0, 1)  # ran the runtime (0), or refused in one line (1)
    assert r.returncode == 0 or (err.startswith("xpu-container-runtime: ") and err.count("\n") == 1), err
    return err


def test_wrapper_odd_argv_and_configs(san: Path, tmp_path: Path) -> None:
    """Every run ends in the fake runtime or one line (exit 1), the config edited where it should."""
    box = twr.Box(tmp_path)
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
        (b'{"process":{"env":["CXPU_VISIBLE_DEVICES=' + b"0-7," * 10_000 + b'"]}}', False),  # a last empty token
        (b'{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"linux":{"devices":7}}', False),
        (b'{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"mounts":[{"destination":"/a"}],"mounts":[]}',
         False),  # a duplicate key: refused
        (box.config(["CXPU_VISIBLE_DEVICES=0-7"], {"cdi.k8s.io/a": "kunlunxin.com/xpu=all"}), False),  # no "all" here
        (box.config(["CXPU_VISIBLE_DEVICES=0-7"], {"cdi.k8s.io/a": "kunlunxin.com/xpu=7"}), True),
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
