"""fast/select.c, names.c and registry.c (request.h) against the Python it twins: ``hook.select`` (hook
indexes, selection variables, annotations), ``cdi.names`` and
``cdi.registry`` (spec dirs, precedence, ``merge_edits``) plus the
wrapper's ``_extra_edits`` (additionalGids, unsupported edits).

Through ``xpu-cdi-fast-test request ...`` (request_test.c).  The rule:
whenever C answers, its answer equals Python's; wherever Python raises or
reports a problem, C defers ("DEFER <reason>").  Deferring is always
allowed by that rule, so the common cases are also checked to be answered.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fakehost
from xpu_cdi.cdi import registry
from xpu_cdi.errors import SelectionError, SpecError
from xpu_cdi.hook import select
from xpu_cdi.runtime import wrapper

XPU = "kunlunxin.com/xpu"
NPU = "huawei.com/npu"
GPU = "example.com/gpu"
ERROR = "ERROR"  # Python raised (or reported a registry problem)
NODE_FIELDS = ("path", "hostPath", "type", "major", "minor", "fileMode", "uid", "gid", "permissions")
MOUNT_FIELDS = ("hostPath", "containerPath", "type", "options")
HOOK_FIELDS = ("hookName", "path", "args")
SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
Answer = Union[str, Any]  # "DEFER <reason>" or the parsed JSON answer


@pytest.fixture(scope="module")
def fast(fast_bin: Path) -> Path:
    exe = fast_bin / "xpu-cdi-fast-test"
    assert exe.exists(), f"{exe} is not built (build.py --out DIR xpu-cdi-fast-test; XPU_CDI_FAST_BIN=DIR)"
    return exe


def deferred(answer: Answer) -> bool:
    if isinstance(answer, str):
        assert answer.startswith("DEFER ") and len(answer) > len("DEFER "), answer
        return True
    return False


def run(exe: Path, args: Sequence[str], stdin: str = "") -> List[str]:
    out = subprocess.run([str(exe), "request", *args], input=stdin.encode(), capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    lines = out.stdout.decode().split("\n")
    assert lines[-1] == ""
    return lines[:-1]


def parse(line: str) -> Answer:
    return line if line.startswith("DEFER") else json.loads(line)


# -- requested ---------------------------------------------------------------


def case(env: Optional[List[Any]] = None, state: Optional[Dict[str, Any]] = None,
         config: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    return {"env": env, "annState": state, "annConfig": config}


def c_requested(exe: Path, dirs: Sequence[Path], cases: Sequence[Dict[str, Any]]) -> List[Answer]:
    """C's answers, one process run for all cases."""
    lines = run(exe, ["requested", *map(str, dirs)], "".join(json.dumps(c) + "\n" for c in cases))
    assert len(lines) == len(cases)
    return [parse(line) for line in lines]


def py_requested(dirs: Sequence[Path], c: Dict[str, Any]) -> Any:
    """select.requested as the hook calls it (state.container merges the annotations)."""
    annotations: Dict[str, str] = {}
    for source in (c["annState"], c["annConfig"]):
        for k, v in (source or {}).items():
            annotations[str(k)] = v if isinstance(v, str) else str(v)
    try:
        return select.requested(c["env"] or [], annotations, select.load_indexes([str(d) for d in dirs]))
    except SelectionError:
        return ERROR


def check_requested(exe: Path, dirs: Sequence[Path], cases: Sequence[Dict[str, Any]]) -> List[Answer]:
    """C's answers, each either a deferral or Python's answer."""
    answers = c_requested(exe, dirs, cases)
    for c, got in zip(cases, answers):
        if deferred(got):
            continue
        want = py_requested(dirs, c)
        assert want != ERROR, f"C answered {got} where Python refuses: {c}"
        assert got == want, c
    return answers


# -- resolve -----------------------------------------------------------------


def c_resolve(exe: Path, dirs: Sequence[Path], names: Sequence[str]) -> Answer:
    lines = run(exe, ["resolve", *map(str, dirs), "--", *names])
    assert len(lines) == 1
    return parse(lines[0])


def py_resolve(dirs: Sequence[Path], names: Sequence[str]) -> Any:
    reg = registry.load([str(d) for d in dirs])
    try:
        devices = [reg.lookup(q) for q in names]
    except SelectionError:
        return ERROR
    out: Dict[str, Any] = dict(registry.merge_edits(devices))
    try:
        out["additionalGids"], out["unsupported"] = wrapper._extra_edits(devices), None
    except SpecError as err:
        m = re.search(r"needs '(\w+)'", str(err))
        assert m, err
        out["additionalGids"], out["unsupported"] = None, m.group(1)
    out["problems"] = reg.problems
    return out


def same_problem(c: str, py: str) -> bool:
    """The same line, but for the parser's own words after "not valid JSON: " (yajl's are not json's)."""
    for cut in ("not valid JSON: ", "not valid YAML: "):
        if cut in c and cut in py:
            return c.split(cut)[0] == py.split(cut)[0]
    return c == py


def pick(entry: Dict[str, Any], keys: Sequence[str]) -> Dict[str, Any]:
    return {k: entry[k] for k in keys if k in entry}


def check_resolve(exe: Path, dirs: Sequence[Path], names: Sequence[str], answer: bool = False) -> Answer:
    """C's merged edits: a refusal, or Python's merge_edits (the struct's fields too) with the same
    problems reported (broken or conflicting files, skipped)."""
    got = c_resolve(exe, dirs, names)
    if answer:
        assert not deferred(got), got
    if deferred(got):
        return got
    want = py_resolve(dirs, names)
    assert want != ERROR, f"C answered where Python refuses: {names} in {dirs}"
    for key in ("env", "deviceNodes", "mounts", "hooks", "unsupported"):
        assert got[key] == want[key], key
        # same spelling too (1 is not 1.0 or true for the consumers)
        assert json.dumps(got[key], sort_keys=True) == json.dumps(want[key], sort_keys=True), key
    if want["unsupported"] is None:
        assert got["additionalGids"] == want["additionalGids"]
    assert len(got["problems"]) == len(want["problems"]), (got["problems"], want["problems"])
    assert all(same_problem(c, p) for c, p in zip(got["problems"], want["problems"])), \
        (got["problems"], want["problems"])
    fields = got["fields"]
    assert fields["deviceNodes"] == [pick(n, NODE_FIELDS) for n in want["deviceNodes"]]
    assert fields["mounts"] == [pick(m, MOUNT_FIELDS) for m in want["mounts"]]
    assert fields["hooks"] == [pick(h, HOOK_FIELDS) for h in want["hooks"]]
    return got


# -- spec dirs ---------------------------------------------------------------


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def node(path: str, minor: int, **extra: Any) -> Dict[str, Any]:
    out = {"path": path, "hostPath": path, "type": "c", "major": 250, "minor": minor, "fileMode": 0o666,
           "permissions": "rwm"}
    out.update(extra)
    return out


def spec(kind: str, devices: Dict[str, Dict[str, Any]], edits: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {"cdiVersion": "0.5.0", "kind": kind,
                           "devices": [{"name": n, "containerEdits": e} for n, e in devices.items()]}
    if edits is not None:
        out["containerEdits"] = edits
    return out


def index(kind: str, env: Sequence[str], indices: Dict[str, str], **extra: Any) -> Dict[str, Any]:
    return {"xpuCdiIndex": 1, "kind": kind, "selection": {"env": list(env)}, "indices": indices, **extra}


def gpu_devices(names: Sequence[str], minor0: int = 0) -> Dict[str, Dict[str, Any]]:
    return {n: {"deviceNodes": [node(f"/dev/gpu{n}", minor0 + i)], "env": [f"GPU_{n}=1"]}
            for i, n in enumerate(names)}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Specs as `xpu-cdi generate` writes them: a 4-card Kunlunxin host (JSON)
    and a 4-card Ascend host (YAML, with its compact copy in the index)."""
    base = tmp_path_factory.mktemp("request-gen")
    cdi = base / "cdi"
    exe = str(Path(sys.executable).parent / "xpu-cdi")
    for maker, fmt in ((fakehost.kunlunxin, "json"), (fakehost.ascend, "yaml")):
        host = maker(base / fmt, 4)
        r = subprocess.run([exe, "generate", *host.cli_roots, "--spec-dir", str(cdi), "--format", fmt],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in cdi.iterdir()) == ["huawei.com-npu.yaml", "huawei.com-npu.yaml.xpu-cdi",
                                                     "kunlunxin.com-xpu.json", "kunlunxin.com-xpu.json.xpu-cdi"]
    yield cdi
    fakehost.remove_tree(base)


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A hand-written kind with no "all" device, sparse card indices and two variables."""
    d = tmp_path_factory.mktemp("request-gpu")
    write_json(d / "gpu.json", spec(GPU, gpu_devices(["a", "b", "c", "d"]), {"env": ["GPU_SHARED=1"]}))
    write_json(d / "gpu.json.xpu-cdi", index(GPU, ["GPU_DEVS", "GPU_DEVS2"], {"10": "c", "0": "a", "2": "b", "3": "d"}))
    yield d
    shutil.rmtree(d)


# -- tests: selection ----------------------------------------------------------


def xpu(*cards: Any) -> List[str]:
    return [f"{XPU}={c}" for c in cards]


COMMON = [  # (env, expected): the front end must answer these itself
    (["CXPU_VISIBLE_DEVICES=1,3"], xpu(1, 3)),
    (["CXPU_VISIBLE_DEVICES=0-3"], xpu(0, 1, 2, 3)),
    (["CXPU_VISIBLE_DEVICES=all"], xpu("all")),
    (["CXPU_VISIBLE_DEVICES=void"], []),
    (["CXPU_VISIBLE_DEVICES=none"], []),
    (["CXPU_VISIBLE_DEVICES="], []),
    (["CXPU_VISIBLE_DEVICES= 1 , 2 "], xpu(1, 2)),
    (["CXPU_VISIBLE_DEVICES=3,1,1,0-1,2-3"], xpu(0, 1, 2, 3)),
    (["CXPU_VISIBLE_DEVICES=1,all"], xpu("all")),
    (["CXPU_VISIBLE_DEVICES=000002"], xpu(2)),
    (["CXPU_VISIBLE_DEVICES=0", "CXPU_VISIBLE_DEVICES=2"], xpu(2)),  # later entry wins
    (["XPU_VISIBLE_DEVICES=0,1"], []),  # Kunlunxin's in-process variable selects nothing
    (["CXPU_VISIBLE_DEVICES=2,3", "XPU_VISIBLE_DEVICES=0,1"], xpu(2, 3)),
    (["CXPU_VISIBLE_DEVICES=3"], xpu(3)),
    (["ASCEND_VISIBLE_DEVICES=0-1", "CXPU_VISIBLE_DEVICES=3"], [f"{NPU}=0", f"{NPU}=1", *xpu(3)]),  # kinds sorted
    (["PATH=/bin", 7, None, "CXPU_VISIBLE_DEVICES", "CXPU_VISIBLE_DEVICES=1"], xpu(1)),  # non-str and no '=' skipped
    ([], []),
    (None, []),
]


def test_common_selections_answered(fast: Path, generated: Path) -> None:
    cases = [case(env) for env, _ in COMMON]
    answers = check_requested(fast, [generated], cases)
    for (env, want), got in zip(COMMON, answers):
        assert got == want, env


SELECTION_EDGES = ["9", "3-1", "0-4096", "1-", "-1", "1--2", "1-2-3", "1,,2", ",", "0x1", "+1", "1.0", "1 2",
                   "ALL", "all,9", "1234567", "0000001", "Ascend910-0", "npu-1", "\u0661", "\u00a01", "1\u00a0",
                   "x" * 65, "1," * 40000, "void ", " void", "\nvoid\t", "\x1c1\x1f", "1\x00", "0-0"]


def test_selection_edges_match_python(fast: Path, generated: Path, gpu: Path) -> None:
    cases = [case([f"{var}={value}"]) for var in ("CXPU_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES", "GPU_DEVS")
             for value in SELECTION_EDGES]
    answers = check_requested(fast, [generated, gpu], cases)
    by_value = dict(zip(((c["env"][0]) for c in cases), answers))
    # what Python refuses is deferred (for its wording)
    for bad in ("9", "3-1", "0-4096", "1-2-3", "Ascend910-0", "\u0661", "1," * 40000):
        assert deferred(by_value[f"CXPU_VISIBLE_DEVICES={bad}"]), bad
    # alias tokens are answered from the index's prefixes (no regex, no deferral)
    assert by_value["ASCEND_VISIBLE_DEVICES=npu-1"] == ["huawei.com/npu=1"]
    assert by_value["ASCEND_VISIBLE_DEVICES=Ascend910-0"] == ["huawei.com/npu=0"]
    # and the plain ones are answered
    assert by_value["CXPU_VISIBLE_DEVICES=0-0"] == xpu(0)
    assert by_value["CXPU_VISIBLE_DEVICES=\nvoid\t"] == []
    assert by_value["CXPU_VISIBLE_DEVICES=\x1c1\x1f"] == xpu(1)
    assert by_value["ASCEND_VISIBLE_DEVICES=void "] == []


def test_no_all_device_lists_cards(fast: Path, gpu: Path) -> None:
    cases = [case(["GPU_DEVS=all"]), case(["GPU_DEVS=2,10"]), case(["GPU_DEVS=0-3"]), case(["GPU_DEVS2=3"]),
             case(["GPU_DEVS=void"]), case(["GPU_DEVS=none"])]
    answers = check_requested(fast, [gpu], cases)
    assert answers[0] == [f"{GPU}={n}" for n in ("a", "b", "d", "c")]  # by index, not by name or position
    assert answers[1] == [f"{GPU}=b", f"{GPU}=c"]
    assert deferred(answers[2])  # no card 1
    assert answers[3] == [f"{GPU}=d"]
    assert answers[4] == [] and answers[5] == []


def test_index_precedence_and_shapes(fast: Path, tmp_path: Path) -> None:
    """Later dirs and later files win per kind; only usable indexes count; a
    broken one disables its kind (C may defer there, never answer otherwise)."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_json(a / "1.xpu-cdi", index(GPU, ["V"], {"0": "a0", "1": "a1"}, all="a-all"))
    write_json(b / "1.xpu-cdi", index(GPU, ["V"], {"0": "b0", "1": "b1"}))
    write_json(b / "2.xpu-cdi", index(GPU, ["V"], {"0": "b0", "1": "late", "01": "zero-one", "1 ": "x"}))  # unusable
    write_json(b / "3.xpu-cdi", index(GPU, ["V"], {"1": "c1", "0": "c0", "01": "c01"}))
    write_json(b / "4.xpu-cdi", '{"xpuCdiIndex": true, "kind": "k/true", "selection": {"env": ["T"]},'
                                ' "indices": {"0": "t0"}}')  # True == 1
    write_json(b / "5.xpu-cdi", index("k/none", ["N"], {"0": "n0"}, selection={"env": ["N"], "none": None}))
    write_json(b / "6.xpu-cdi", index("k/ver2", ["W"], {"0": "w0"}, xpuCdiIndex=2))
    write_json(b / "7.xpu-cdi", index("k/float", ["F"], {"0": "f0"}, xpuCdiIndex=1.0))
    write_json(b / "8.xpu-cdi", index("k/nonenone", ["M"], {"0": "m0"}, selection={"env": ["M"], "none": []}))
    write_json(b / "9.xpu-cdi", index("k/aliases", ["AL"], {"0": "al0"}, selection={"env": ["AL"], "aliases": 5}))
    (b / "dir.xpu-cdi").mkdir()
    os.symlink(b / "missing", b / "dangling.xpu-cdi")
    write_json(b / "other.json", "{}")
    cases = [case(["V=all"]), case(["V=1"]), case(["V=0-1"]), case(["T=0"]), case(["N=0"]), case(["W=0"]),
             case(["F=0"]), case(["M=void"]), case(["M="]), case(["AL=0"])]
    answers = check_requested(fast, [a, b], cases)
    # sorted by int, stable: "1" before "01" as in the dict
    assert answers[:3] == [[f"{GPU}=c0", f"{GPU}=c1", f"{GPU}=c01"], [f"{GPU}=c1"], [f"{GPU}=c0", f"{GPU}=c1"]]
    assert answers[3] == ["k/true=t0"]
    assert answers[4:7] == [[], [], ["k/float=f0"]]
    assert answers[7:9] == [[], []]  # "none": [] means the default none values
    assert answers[9] == []
    # C and Python see the same indexes
    got = json.loads(run(fast, ["indexes", str(a), str(b), str(tmp_path / "missing"), str(b / "other.json")])[0])
    assert got == select.load_indexes([str(a), str(b), str(tmp_path / "missing"), str(b / "other.json")])
    assert list(got) == sorted(got)


def test_broken_index_only_disables_its_kind(fast: Path, tmp_path: Path) -> None:
    write_json(tmp_path / "a.xpu-cdi", index(GPU, ["V"], {"0": "g0"}))
    write_json(tmp_path / "b.xpu-cdi", '{"xpuCdiIndex": 1, "kind": "k/nan", "x": NaN}')  # Python reads NaN
    assert check_requested(fast, [tmp_path], [case(["V=0"])]) == [[f"{GPU}=g0"]]  # only b's kind loses env
    (tmp_path / "b.xpu-cdi").write_text('{"xpuCdiIndex": 1, ')  # not JSON at all
    assert check_requested(fast, [tmp_path], [case(["V=0"])]) == [[f"{GPU}=g0"]]
    (tmp_path / "b.xpu-cdi").write_text(" " * (1 << 20) + "{}")  # over the 1 MiB read
    assert check_requested(fast, [tmp_path], [case(["V=0"])]) == [[f"{GPU}=g0"]]
    (tmp_path / "b.xpu-cdi").unlink()
    assert check_requested(fast, [tmp_path], [case(["V=0"])]) == [[f"{GPU}=g0"]]


def test_range_bounds(fast: Path, tmp_path: Path) -> None:
    """At most MAX_RANGE cards per range, however many the index has."""
    write_json(tmp_path / "big.xpu-cdi", index(GPU, ["V"], {str(i): f"n{i}" for i in range(5000)}))
    values = ["0-4095", "0-4096", "1-4096", "904-4999,0-1,2-3,3-3", "4999-0", "4999"]
    answers = check_requested(fast, [tmp_path], [case([f"V={v}"]) for v in values])
    assert answers[0] == [f"{GPU}=n{i}" for i in range(4096)]
    assert deferred(answers[1]) and deferred(answers[4])
    assert answers[2] == [f"{GPU}=n{i}" for i in range(1, 4097)]
    assert answers[3] == [f"{GPU}=n{i}" for i in [0, 1, 2, 3, *range(904, 5000)]]
    assert answers[5] == [f"{GPU}=n4999"]


ANNOTATION_CASES = [  # (state, config, expected or None: must defer)
    (None, {"cdi.k8s.io/a": f"{XPU}=1"}, xpu(1)),
    ({"cdi.k8s.io/a": f"{XPU}=1"}, {"cdi.k8s.io/a": f"{XPU}=2"}, xpu(2)),  # config wins
    ({"cdi.k8s.io/b": f"{XPU}=1"}, {"cdi.k8s.io/a": f"{XPU}=2, {NPU}=all ,{XPU}=2"}, [*xpu(2), f"{NPU}=all", *xpu(1)]),
    (None, {"cdi.k8s.io/a": f"{XPU}=0\n"}, xpu(0)),  # the value is stripped
    (None, {"cdi.k8s.io/a\n": f"{XPU}=0"}, None),  # \Z: no trailing newline in the key
    (None, {"cdi.k8s.io/a": f"{XPU}=0\n1"}, None),
    (None, {"cdi.k8s.io/a": ""}, None),
    (None, {"cdi.k8s.io/a": " , "}, None),
    (None, {"cdi.k8s.io/a": f"{XPU}=0,"}, None),
    (None, {"cdi.k8s.io/": f"{XPU}=0"}, None),
    (None, {"cdi.k8s.io/-a": f"{XPU}=0"}, None),
    (None, {"cdi.k8s.io/a_": f"{XPU}=0"}, None),
    (None, {"cdi.k8s.io/" + "a" * 63: f"{XPU}=0"}, xpu(0)),
    (None, {"cdi.k8s.io/" + "a" * 64: f"{XPU}=0"}, None),
    (None, {"cdi.k8s.io/a": "1kunlunxin.com/xpu=0"}, None),  # vendor starts with a letter
    (None, {"cdi.k8s.io/a": "kunlunxin.com./xpu=0"}, None),
    (None, {"cdi.k8s.io/a": "kunlunxin.com/xpu/x=0"}, None),
    (None, {"cdi.k8s.io/a": "kunlunxin.com/xpu"}, None),
    (None, {"cdi.k8s.io/a": "kunlunxin.com/xpu=0:1"}, ["kunlunxin.com/xpu=0:1"]),
    (None, {"cdi.k8s.io/a": "kunlunxin.com/xpu=:1"}, None),
    (None, {"cdi.k8s.io/a": "a/b=c"}, ["a/b=c"]),  # not checked against the specs here
    (None, {"cdi.k8s.io/a": 5}, None),
    (None, {"cdi.k8s.io/a": None}, None),
    (None, {"cdi.k8s.io/a": [f"{XPU}=0"]}, None),
    (None, {"other": 5, "cdi.k8s.io.x/a": "junk", "CDI.k8s.io/a": "junk"}, []),
    ({"cdi.k8s.io/z": f"{XPU}=3"}, {"cdi.k8s.io/z": 7}, None),  # config's non-string wins
    ({"cdi.k8s.io/z": 7}, {"cdi.k8s.io/z": f"{XPU}=3"}, xpu(3)),
    (None, {"cdi.k8s.io/a": f"{XPU}=\u00e90"}, None),
    (None, {"cdi.k8s.io/a": f"\u00a0{XPU}=0"}, None),  # Python strips NBSP: C defers
]


def test_annotations(fast: Path, generated: Path) -> None:
    cases = [case(["CXPU_VISIBLE_DEVICES=3"], s, c) for s, c, _ in ANNOTATION_CASES]
    answers = check_requested(fast, [generated], cases)
    for (s, c, want), got in zip(ANNOTATION_CASES, answers):
        if want is None:
            assert deferred(got), (s, c)
        else:
            assert got == [o for o in dict.fromkeys(xpu(3) + want)], (s, c)


def test_duplicate_keys_in_annotations_refused(fast: Path, generated: Path) -> None:
    """Neither the first nor the last of two same-named annotations is guessed."""
    line = '{"env": [], "annConfig": {"cdi.k8s.io/a": "kunlunxin.com/xpu=0", "cdi.k8s.io/a": "kunlunxin.com/xpu=1"}}'
    out = subprocess.run([str(fast), "request", "requested", str(generated)], input=line.encode() + b"\n",
                         capture_output=True, timeout=60)
    assert out.returncode != 0 and b'duplicate key "cdi.k8s.io/a"' in out.stderr


# -- property: random selection values and annotations ------------------------

SEL_ALPHABET = "0123456789,- \talvoidnAscend9\n"
VARS = ["CXPU_VISIBLE_DEVICES", "CXPU_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES", "GPU_DEVS", "GPU_DEVS2", "OTHER"]
DEVICES = [f"{XPU}=0", f"{NPU}=all", "a/b=c", "a/b=", "/b=c", "a/=c", "1a/b=c", "a./b=c", "a/b=c.", "a/b=c:d",
           "a/b/c=d", XPU, " a/b=c ", "a-b_c.d/e=f"]
cards = st.one_of(st.integers(0, 5).map(str),
                  st.tuples(st.integers(0, 5), st.integers(0, 5)).map(lambda t: f"{t[0]}-{t[1]}"),
                  st.sampled_from(["all", " 1", "2 ", "void", ""]))
values = st.one_of(st.lists(cards, min_size=1, max_size=4).map(",".join),  # mostly plausible
                   st.lists(cards, min_size=1, max_size=4).map(",".join),
                   st.text(SEL_ALPHABET, max_size=12), st.text(max_size=6))
env_entries = st.one_of(st.tuples(st.sampled_from(VARS), values).map(lambda t: f"{t[0]}={t[1]}"),
                        st.sampled_from([None, 3, "NOEQUALS", "=x"]))
good_annotations = st.dictionaries(
    st.sampled_from(["cdi.k8s.io/a", "cdi.k8s.io/b_1", "cdi.k8s.io/x.y-z", "cdi.k8s.io/9"]),
    st.lists(st.sampled_from([f"{XPU}=0", f"{NPU}=all", "a/b=c", " a-b_c.d/e=f ", "a/b=c:d", f"{XPU}=1\n"]),
             min_size=1, max_size=3).map(",".join), max_size=3)
ann_keys = st.one_of(st.sampled_from(["cdi.k8s.io/a", "cdi.k8s.io/b_1", "cdi.k8s.io/x.y-z", "cdi.k8s.io/",
                                      "cdi.k8s.io/a\n", "other", "cdi.k8s.io/" + "a" * 64]),
                     st.text("ab_.-/\n9", max_size=8).map(lambda s: "cdi.k8s.io/" + s))
ann_values = st.one_of(st.lists(st.sampled_from(DEVICES), max_size=3).map(",".join),
                       st.text("kunlx.com/xpu=01, \n:_-A", max_size=24),
                       st.sampled_from([None, 1, True, [f"{XPU}=0"]]))
annotations = st.one_of(st.none(), good_annotations, good_annotations,
                        st.dictionaries(ann_keys, ann_values, max_size=4))
cases = st.builds(case, st.one_of(st.none(), st.lists(env_entries, max_size=4)), annotations, annotations)


@SETTINGS
@given(st.lists(cases, min_size=1, max_size=60))
def test_requested_property(fast: Path, generated: Path, gpu: Path, batch: List[Dict[str, Any]]) -> None:
    answers = check_requested(fast, [generated, gpu], batch)
    for c, got in zip(batch, answers):
        # and C declines only what Python refuses, or what needs what C leaves to it
        if deferred(got) and not needs_python(c):
            assert py_requested([generated, gpu], c) == ERROR, (c, got)


def needs_python(c: Dict[str, Any]) -> bool:
    """Non-ASCII text (Unicode whitespace), NUL, or a profile alias (Ascend's regex)."""
    texts = [e for e in c["env"] or [] if isinstance(e, str)]
    for ann in (c["annState"], c["annConfig"]):
        texts += [f"{k}={v}" for k, v in (ann or {}).items() if isinstance(v, str)]
    return any(not t.isascii() or "\x00" in t for t in texts) or "Ascend" in repr(c) or "npu-" in repr(c)


# -- tests: resolve ----------------------------------------------------------


def test_generated_specs_answered(fast: Path, generated: Path) -> None:
    for names in ([f"{XPU}=1", f"{XPU}=3"], [f"{NPU}=0", f"{XPU}=2", f"{NPU}=1"], [f"{XPU}=all", f"{XPU}=0"],
                  [f"{XPU}=1", f"{XPU}=1"], [f"{NPU}=all"]):
        got = check_resolve(fast, [generated], names, answer=True)
        assert got["deviceNodes"] and got["mounts"] and got["hooks"]
    got = check_resolve(fast, [generated], [f"{XPU}=1", f"{XPU}=3"], answer=True)
    assert [n["path"] for n in got["deviceNodes"]] == ["/dev/xpuctrl", "/dev/xpu1", "/dev/xpu3"]


def test_unknown_device_defers(fast: Path, generated: Path) -> None:
    assert deferred(check_resolve(fast, [generated], [f"{XPU}=9"]))
    assert deferred(check_resolve(fast, [generated], [f"{XPU}=1", "other.com/x=1"]))


def test_yaml_spec_read_itself(fast: Path, generated: Path, tmp_path: Path) -> None:
    """A YAML spec is read with libyaml whatever its index says: changed after
    its index was written, without an index, or carrying an older version's
    "compact" copy (ignored)."""
    d = tmp_path / "cdi"
    shutil.copytree(generated, d)
    check_resolve(fast, [d], [f"{NPU}=1"], answer=True)
    yaml_path = d / "huawei.com-npu.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("/dev/davinci1", "/dev/davinci-edited"))
    got = check_resolve(fast, [d], [f"{NPU}=1", f"{XPU}=0"], answer=True)
    assert "/dev/davinci-edited" in [n["path"] for n in got["deviceNodes"]]
    idx = json.loads((d / "huawei.com-npu.yaml.xpu-cdi").read_text())
    idx["compact"] = {"cdiVersion": "0.6.0", "kind": NPU, "devices": [{"name": "1", "containerEdits": {}}]}
    (d / "huawei.com-npu.yaml.xpu-cdi").write_text(json.dumps(idx))
    assert check_resolve(fast, [d], [f"{NPU}=1"], answer=True) == check_resolve(fast, [d], [f"{NPU}=1"])
    (d / "huawei.com-npu.yaml.xpu-cdi").unlink()
    check_resolve(fast, [d], [f"{NPU}=1", f"{XPU}=1"], answer=True)


def test_yaml_spec_from_another_tool(fast: Path, tmp_path: Path) -> None:
    """A YAML spec with no index beside it, written as Go's yaml.Marshal writes one,
    resolves as its JSON twin; an unquoted `name: 0` and `fileMode: 0660` read as
    the CDI Go library reads them ("0", 432), where PyYAML would make the name an int."""
    text = """\
cdiVersion: 0.6.0
devices:
- containerEdits:
    deviceNodes:
    - path: /dev/accel0
      type: c
      major: 0xf0
      minor: 0
      fileMode: 0660
  name: 0
kind: vendor.example/accel
containerEdits:
  env: [VENDOR=yes, on]
"""
    (tmp_path / "vendor.yaml").write_text(text)
    got = c_resolve(fast, [tmp_path], ["vendor.example/accel=0"])
    assert not deferred(got), got
    assert got["env"] == ["VENDOR=yes", "true"]  # `on` is a YAML 1.1 boolean, coerced into the string field
    assert got["fields"]["deviceNodes"] == [{"path": "/dev/accel0", "type": "c", "major": 240, "minor": 0,
                                             "fileMode": 432}]
    (tmp_path / "vendor.yaml").write_text(text.replace("  name: 0", '  name: "0"').replace(", on]", "]"))
    check_resolve(fast, [tmp_path], ["vendor.example/accel=0"], answer=True)  # and as the Python registry reads it


def test_precedence_and_spec_identity(fast: Path, tmp_path: Path) -> None:
    """A later dir's device replaces an earlier one's; each spec file's shared
    edits come once, before the first of its devices that is requested."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_json(a / "gpu.json", spec(GPU, gpu_devices(["0", "1", "2"]),
                                    {"env": ["FROM=a"], "deviceNodes": [node("/dev/gpuctl", 200)],
                                     "mounts": [{"hostPath": "/a", "containerPath": "/lib/gpu"}]}))
    write_json(b / "gpu.json", spec(GPU, gpu_devices(["1"], 50),
                                    {"env": ["FROM=b"], "deviceNodes": [node("/dev/gpuctl", 201)],
                                     "mounts": [{"hostPath": "/b", "containerPath": "/lib/gpu", "options": ["ro"]},
                                                {"hostPath": "/b2", "containerPath": "/lib/b2", "type": "bind"}]}))
    write_json(b / "notes.txt", "not a spec")
    write_json(b / "x.yml", "not a spec either")
    got = check_resolve(fast, [a, b], [f"{GPU}=0", f"{GPU}=1", f"{GPU}=2", f"{GPU}=0"], answer=True)
    assert got["env"] == ["FROM=a", "GPU_0=1", "FROM=b", "GPU_1=1", "GPU_2=1", "GPU_0=1"]
    assert [n["minor"] for n in got["deviceNodes"]] == [200, 0, 50, 2]  # /dev/gpuctl from a: seen first
    assert [m["hostPath"] for m in got["mounts"]] == ["/a", "/b2"]
    got = check_resolve(fast, [a, b], [f"{GPU}=1", f"{GPU}=0"], answer=True)
    assert got["env"] == ["FROM=b", "GPU_1=1", "FROM=a", "GPU_0=1"]
    # the same dir twice (spelt two ways): one path per file, shared edits once
    got = check_resolve(fast, [a, Path(str(a) + "/")], [f"{GPU}=0", f"{GPU}=1"], answer=True)
    assert got["env"] == ["FROM=a", "GPU_0=1", "GPU_1=1"]
    # a missing dir is no problem
    check_resolve(fast, [tmp_path / "missing", a], [f"{GPU}=2"], answer=True)


BROKEN = {
    "not-json": "{",
    "array": [],
    "no-version": {"kind": GPU, "devices": [{"name": "9", "containerEdits": {}}]},
    "kind-no-slash": {"cdiVersion": "0.5.0", "kind": "gpu", "devices": [{"name": "9", "containerEdits": {}}]},
    "kind-two-slashes": {"cdiVersion": "0.5.0", "kind": "a/b/c", "devices": [{"name": "9", "containerEdits": {}}]},
    "no-devices": {"cdiVersion": "0.5.0", "kind": GPU, "devices": []},
    "device-no-edits": {"cdiVersion": "0.5.0", "kind": GPU, "devices": [{"name": "9"}]},
    "device-name-int": {"cdiVersion": "0.5.0", "kind": GPU, "devices": [{"name": 9, "containerEdits": {}}]},
    "edits-list": spec(GPU, {"9": {}}, []),  # type: ignore[arg-type]
    "env-not-strings": spec(GPU, {"9": {"env": ["A=1", 2]}}),
    "nodes-not-list": spec(GPU, {"9": {"deviceNodes": {}}}),
    "node-no-path": spec(GPU, {"9": {"deviceNodes": [{"hostPath": "/dev/x"}]}}),
    "mount-no-target": spec(GPU, {"9": {"mounts": [{"hostPath": "/x"}]}}),
    "hook-no-name": spec(GPU, {"9": {}}, {"hooks": [{"path": "/bin/true"}]}),
    "conflict-in-file": spec(GPU, {"9": {}, "8": {}}) | {"devices": [{"name": "9", "containerEdits": {}}] * 2},
}


@pytest.mark.parametrize("what", sorted(BROKEN))
def test_broken_spec_is_skipped_and_reported(fast: Path, tmp_path: Path, what: str) -> None:
    """A broken file is skipped with one line (the same line the tooling's registry reports); the
    good file beside it still serves its device."""
    write_json(tmp_path / "good.json", spec(GPU, gpu_devices(["0"])))
    write_json(tmp_path / "zz-broken.json", BROKEN[what])
    got = check_resolve(fast, [tmp_path], [f"{GPU}=0"], answer=True)
    assert len(got["problems"]) == 1 and "zz-broken.json" in got["problems"][0], got["problems"]
    assert got["deviceNodes"][0]["path"] == "/dev/gpu0"


@pytest.mark.parametrize("extra", ["NaN", "-Infinity", '"\\ud800"', "[" * 300 + "]" * 300, "1" * 700])
def test_json_only_python_reads_is_skipped(fast: Path, tmp_path: Path, extra: str) -> None:
    """JSON Python's json module takes but the binaries' parser refuses (NaN, a lone surrogate, deep
    nesting, a huge number): that file is skipped and reported, the others still count."""
    write_json(tmp_path / "good.json", spec(GPU, gpu_devices(["0"])))
    write_json(tmp_path / "odd.json", json.dumps(spec(GPU, gpu_devices(["9"])))[:-1] + f', "x": {extra}}}')
    got = c_resolve(fast, [tmp_path], [f"{GPU}=0"])
    assert not deferred(got) and got["deviceNodes"][0]["path"] == "/dev/gpu0", got
    [problem] = got["problems"]
    assert problem.startswith(f"spec '{tmp_path}/odd.json': not valid JSON: "), problem


def test_other_problems_are_reported(fast: Path, tmp_path: Path) -> None:
    """Conflicts, unreadable entries, a dir that is a file, too many entries: each is one problem line,
    the same the tooling reports, and what can still be served is."""
    good = write_json(tmp_path / "a" / "good.json", spec(GPU, gpu_devices(["0", "1"])))
    check_resolve(fast, [good.parent], [f"{GPU}=0"], answer=True)
    # the same device in two files of one dir
    write_json(tmp_path / "a" / "other.json", spec(GPU, gpu_devices(["1"])))
    assert check_resolve(fast, [good.parent], [f"{GPU}=0"], answer=True)["problems"]
    # a directory named like a spec; a dangling symlink
    (tmp_path / "b").mkdir()
    write_json(tmp_path / "b" / "good.json", spec(GPU, gpu_devices(["0"])))
    (tmp_path / "b" / "dir.json").mkdir()
    assert check_resolve(fast, [tmp_path / "b"], [f"{GPU}=0"], answer=True)["problems"]
    (tmp_path / "b" / "dir.json").rmdir()
    os.symlink(tmp_path / "nowhere", tmp_path / "b" / "link.json")
    assert check_resolve(fast, [tmp_path / "b"], [f"{GPU}=0"], answer=True)["problems"]
    # a spec dir that is a file
    assert deferred(check_resolve(fast, [good], [f"{GPU}=0"]))  # nothing left to serve it
    # too many entries (all of them count, specs or not)
    many = tmp_path / "many"
    write_json(many / "good.json", spec(GPU, gpu_devices(["0"])))
    for i in range(registry.MAX_FILES):
        (many / f"f{i:04d}").touch()
    assert deferred(check_resolve(fast, [many], [f"{GPU}=0"]))  # good.json sorts after the 4096 read
    assert py_resolve([many], [f"{GPU}=0"]) == ERROR
    (many / "f0000").unlink()
    check_resolve(fast, [many], [f"{GPU}=0"], answer=True)


def test_hooks_deduplicated_as_python_does(fast: Path, tmp_path: Path) -> None:
    """merge_edits keys a hook by repr(sorted(h.items())): top-level members in
    any order, nested objects in order, 1 / 1.0 / true all different."""
    h = {"hookName": "createContainer", "path": "/bin/h", "args": ["h", "x"], "timeout": 10}
    hooks = {
        "0": [h, dict(reversed(list(h.items())))],  # the same hook
        "1": [dict(h, timeout=10.0)],  # another
        "2": [dict(h, extra={"a": 1, "b": 2}), dict(h, extra={"b": 2, "a": 1})],  # two: nested order matters
        "3": [dict(h, timeout=True), dict(h, timeout=1), dict(h, timeout=1.0), dict(h, timeout=1e0)],
        "4": [dict(h, extra=[0.0]), dict(h, extra=[-0.0]), dict(h, extra=[0])],
        "5": [dict(h, env=["A=1"]), dict(h, env=["A=1"])],
    }
    write_json(tmp_path / "gpu.json", spec(GPU, {n: {"hooks": v} for n, v in hooks.items()}, {"hooks": [h]}))
    for names in (["0"], ["1"], ["2"], ["3"], ["4"], ["5"], ["0", "1", "2", "3", "4", "5"], ["5", "3", "1"]):
        check_resolve(fast, [tmp_path], [f"{GPU}={n}" for n in names], answer=True)
    got = check_resolve(fast, [tmp_path], [f"{GPU}=2", f"{GPU}=3"], answer=True)
    assert len(got["hooks"]) == 1 + 2 + 3


def test_duplicate_keys_refused(fast: Path, tmp_path: Path) -> None:
    """A spec with a repeated key is refused, naming the key and where it is."""
    text = ('{"cdiVersion": "0.5.0", "kind": "x.com/y", "kind": "example.com/gpu", "devices": ['
            '{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/a", "type": "c", "major": 1,'
            ' "minor": 2}]}}]}')
    write_json(tmp_path / "gpu.json", text)
    got = c_resolve(fast, [tmp_path], [f"{GPU}=0"])
    assert deferred(got) and 'not valid JSON: duplicate key "kind" at line 1, column 50 (byte 49)' in got


def test_gids_and_unsupported(fast: Path, tmp_path: Path) -> None:
    devices = {"0": {"additionalGids": [5, 7, 5]}, "1": {"additionalGids": [7, 9]}, "2": {"intelRdt": {"closID": "x"}},
               "3": {"netDevices": []}, "4": {"netDevices": [{"hostInterfaceName": "eth1"}]}, "5": {"intelRdt": None}}
    write_json(tmp_path / "gpu.json", spec(GPU, devices, {"additionalGids": [3, 5]}))
    got = check_resolve(fast, [tmp_path], [f"{GPU}=1", f"{GPU}=0", f"{GPU}=3", f"{GPU}=5"], answer=True)
    assert got["additionalGids"] == [3, 5, 7, 9] and got["unsupported"] is None
    assert check_resolve(fast, [tmp_path], [f"{GPU}=0", f"{GPU}=2"], answer=True)["unsupported"] == "intelRdt"
    assert check_resolve(fast, [tmp_path], [f"{GPU}=4", f"{GPU}=2"], answer=True)["unsupported"] == "netDevices"


FIELD_CASES = {  # a node/mount/hook field C cannot take as it is: deferred, never guessed
    "major-string": {"deviceNodes": [node("/dev/g", 0, major="250")]},
    "minor-float": {"deviceNodes": [node("/dev/g", 1.0)]},  # type: ignore[arg-type]
    "mode-null": {"deviceNodes": [node("/dev/g", 0, fileMode=None)]},
    "uid-bool": {"deviceNodes": [node("/dev/g", 0, uid=True)]},
    "type-long": {"deviceNodes": [node("/dev/g", 0, type="cc")]},
    "type-empty": {"deviceNodes": [node("/dev/g", 0, type="")]},
    "hostpath-empty": {"deviceNodes": [node("/dev/g", 0, hostPath="")]},
    "permissions-int": {"deviceNodes": [node("/dev/g", 0, permissions=7)]},
    "options-string": {"mounts": [{"hostPath": "/a", "containerPath": "/b", "options": "ro"}]},
    "options-ints": {"mounts": [{"hostPath": "/a", "containerPath": "/b", "options": [1]}]},
    "mount-type-null": {"mounts": [{"hostPath": "/a", "containerPath": "/b", "type": None}]},
    "args-string": {"hooks": [{"hookName": "prestart", "path": "/bin/h", "args": "h"}]},
    "gids-string": {"additionalGids": "12"},
    "gids-bool": {"additionalGids": [True]},
    "env-nul": {"env": ["A=\x00"]},
}


@pytest.mark.parametrize("what", sorted(FIELD_CASES))
def test_unusual_fields_defer(fast: Path, tmp_path: Path, what: str) -> None:
    write_json(tmp_path / "gpu.json", spec(GPU, {"0": FIELD_CASES[what], "1": {}}))
    assert deferred(check_resolve(fast, [tmp_path], [f"{GPU}=0"]))
    check_resolve(fast, [tmp_path], [f"{GPU}=1"], answer=True)


def test_optional_fields_answered(fast: Path, tmp_path: Path) -> None:
    edits = {"deviceNodes": [{"path": "/dev/g0"}, {"path": "/dev/g1", "type": "b", "uid": 0, "gid": 44},
                             {"path": "/dev/g2", "type": "p", "major": -1, "minor": 0},
                             {"path": "/dev/g0", "type": "u"}],
             "mounts": [{"hostPath": "/a", "containerPath": "/b", "options": []},
                        {"hostPath": "/c", "containerPath": "/b"}, {"hostPath": "/c", "containerPath": "/d"}],
             "hooks": [{"hookName": "prestart", "path": "/bin/h"}, {"hookName": "prestart", "path": "/bin/h", "args": []}],
             "env": None}
    write_json(tmp_path / "gpu.json", spec(GPU, {"0": edits}, None))
    got = check_resolve(fast, [tmp_path], [f"{GPU}=0"], answer=True)
    assert len(got["deviceNodes"]) == 3 and len(got["mounts"]) == 2 and len(got["hooks"]) == 2


# -- property: random requests over real and hand-written specs ----------------


@pytest.fixture(scope="module")
def layered(tmp_path_factory: pytest.TempPathFactory, generated: Path) -> Iterator[List[Path]]:
    """generated specs, then a dir overriding some of their devices and adding a kind."""
    d = tmp_path_factory.mktemp("request-layered")
    xpu_spec = json.loads((generated / "kunlunxin.com-xpu.json").read_text())
    xpu_spec["devices"] = [dev for dev in xpu_spec["devices"] if dev["name"] in ("1", "all")]
    xpu_spec["containerEdits"]["env"] = ["LAYER=2"]
    write_json(d / "kunlunxin.com-xpu.json", xpu_spec)
    write_json(d / "gpu.json", spec(GPU, gpu_devices(["a", "b"]), {"env": ["GPU=1"],
                                                                 "hooks": xpu_spec["containerEdits"]["hooks"]}))
    yield [generated, d]
    shutil.rmtree(d)


NAMES = [f"{XPU}={n}" for n in ("0", "1", "2", "3", "all")] + [f"{NPU}={n}" for n in ("0", "3", "all")] + \
    [f"{GPU}=a", f"{GPU}=b"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(NAMES + [f"{GPU}=z"]), min_size=1, max_size=6))
def test_resolve_property(fast: Path, layered: List[Path], names: List[str]) -> None:
    got = check_resolve(fast, layered, names)
    if f"{GPU}=z" not in names:
        assert not deferred(got), got
