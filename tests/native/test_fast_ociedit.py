"""The wrapper's C parts (fast/ociedit.c) against the Python wrapper.

Through ``xpu-cdi-fast-test ociedit ...`` (see ociedit_test.c): ``apply``
against ``runtime.ociedit.apply`` followed by ``jsondump.dumps`` (what the
wrapper writes), ``split`` against ``wrapper.split_command`` and
``option_value``, ``may-request`` against ``bundle.may_request``,
``find-runtime`` against ``wrapper.find_runtime``, ``write`` against
``atomic.write_atomic(durable=False)`` and ``prepare`` against
``wrapper.prepare``.

Every input Python refuses, C must defer (``DEFER <reason>``).  Every
input Python accepts, C must either give the same result (up to JSON
equality: C keeps the source spelling of numbers and strings) or defer --
and it may defer only for the few things listed in ``CONSERVATIVE``, which
are asserted one by one.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wrapper_specs import base_config
from wrapper_specs import edits as shared_edits
from xpu_cdi import atomic
from xpu_cdi.errors import XpuCdiError
from xpu_cdi.runtime import bundle, jsondump, ociedit, wrapper

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
DEFER = "DEFER"


@pytest.fixture(scope="module")
def fast(fast_bin: Path) -> Path:
    exe = fast_bin / "xpu-cdi-fast-test"
    assert exe.exists(), f"{exe} is not built (build.py --out DIR xpu-cdi-fast-test; XPU_CDI_FAST_BIN=DIR)"
    return exe


def ctest(fast: Path, *args: str, env: Optional[Dict[str, str]] = None) -> str:
    r = subprocess.run([str(fast), "ociedit", *args], capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


# -- apply -------------------------------------------------------------------

Result = Union[Dict[str, Any], Tuple[str, str]]


def py_apply(config: Any, edits: Dict[str, Any]) -> Result:
    """What the Python wrapper writes: apply, then jsondump (None: refused)."""
    cfg = copy.deepcopy(config)
    try:
        ociedit.apply(cfg, copy.deepcopy(edits))
        return json.loads(jsondump.dumps(cfg))
    except (XpuCdiError, ValueError, TypeError) as err:
        return ("error", str(err))


def c_apply(fast: Path, tmp: Path, config: Union[str, Any], edits: Dict[str, Any]) -> Result:
    cfg = tmp / "config.json"
    cfg.write_text(config if isinstance(config, str) else json.dumps(config))
    ed = tmp / "edits.json"
    ed.write_text(json.dumps(edits))
    out = ctest(fast, "apply", str(cfg), str(ed))
    if out.startswith(DEFER + " "):
        return (DEFER, out[len(DEFER) + 1:].strip())
    return json.loads(out, object_pairs_hook=no_duplicates)


def no_duplicates(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """json.loads hook: C must write each key once, as Python does."""
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"duplicate keys in C's output: {keys}"
    return dict(pairs)


def check_same(fast: Path, tmp: Path, config: Any, edits: Dict[str, Any], text: Optional[str] = None) -> Result:
    """C gives Python's result; Python's refusals are C's deferrals."""
    want = py_apply(json.loads(text) if text is not None else config, edits)
    got = c_apply(fast, tmp, text if text is not None else config, edits)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and got[0] == DEFER, f"Python refused ({want[1]}), C gave {got}"
    else:
        assert got == want
    return got


def edits() -> Dict[str, Any]:
    """The shared one-card edits plus additionalGids (which merge_edits leaves to the wrapper)."""
    return dict(shared_edits(), additionalGids=[44, 5])


@pytest.fixture(scope="module")
def runc_default(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """The config `runc spec` writes (what a bare runc bundle starts from)."""
    runc = shutil.which("runc", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    if runc is None:
        pytest.skip("runc is not installed")
    d = tmp_path_factory.mktemp("runc-spec")
    subprocess.run([runc, "spec"], cwd=d, check=True, timeout=30)
    return json.loads((d / "config.json").read_text())


def test_runc_default_config(fast: Path, tmp_path: Path, runc_default: Dict[str, Any]) -> None:
    """The edits on `runc spec`'s config: every part of apply at work."""
    got = check_same(fast, tmp_path, runc_default, edits())
    assert isinstance(got, dict) and {"path": "/dev/xpu2", "type": "c", "major": 240, "minor": 2,
                                      "fileMode": 0o666, "uid": 0, "gid": 0} in got["linux"]["devices"]


def test_runc_default_config_text_is_kept(fast: Path, tmp_path: Path, runc_default: Dict[str, Any]) -> None:
    """Empty edits on a compact config: C writes exactly what Python writes."""
    cfg = copy.deepcopy(runc_default)
    cfg["process"]["env"].append("LD_LIBRARY_PATH=/x")
    text = json.dumps(cfg, separators=(",", ":"))
    (tmp_path / "config.json").write_text(text)
    (tmp_path / "edits.json").write_text("{}")
    out = ctest(fast, "apply", str(tmp_path / "config.json"), str(tmp_path / "edits.json")).rstrip("\n")
    py = json.loads(text)
    ociedit.apply(py, {})
    assert out == jsondump.dumps(py)


def test_existing_entries(fast: Path, tmp_path: Path) -> None:
    """Devices and mounts replaced by path (normalised for mounts), rules, hooks and gids
    added only when missing (Python's ==: True == 1), env keys replaced in place."""
    cfg = base_config()
    cfg["linux"]["devices"] = [{"path": "/dev/xpu2", "type": "c", "major": 1, "minor": 1},
                               {"path": "/dev/other", "type": "c", "major": 9, "minor": 9}, "junk", {"path": 5}]
    cfg["linux"]["resources"]["devices"].append({"allow": 1, "type": "c", "major": 240, "minor": 200,
                                                 "access": "rwm"})
    cfg["mounts"] += [{"destination": "/usr/local/xpu/", "source": "/old"}, {"destination": "//usr/local/xpu"},
                      {"destination": "/usr/./local/../local/xpu", "source": "/old2"}, "junk", {"source": "x"}]
    cfg["process"]["env"] += ["XPU_DRIVER=0", "XPU_DRIVER=00", 7, "LD_LIBRARY_PATH=/second::/usr/local/xpu/lib"]
    cfg["process"]["user"] = {"uid": 0, "additionalGids": [True, 44.0]}
    cfg["hooks"] = {"createContainer": [{"path": "/usr/bin/xpu-cdi-hook", "timeout": 10, "env": ["PATH=/bin"],
                                         "args": edits()["hooks"][0]["args"]}], "prestart": "junk"}
    got = check_same(fast, tmp_path, cfg, edits())
    assert isinstance(got, dict)
    assert [m.get("destination") for m in got["mounts"] if isinstance(m, dict)].count("//usr/local/xpu") == 1
    assert got["process"]["user"]["additionalGids"] == [True, 44.0, 5]
    assert len(got["hooks"]["createContainer"]) == 1


def test_no_sections_at_all(fast: Path, tmp_path: Path) -> None:
    """An empty config, and one whose sections have the wrong types: all created as Python does."""
    check_same(fast, tmp_path, {}, edits())
    check_same(fast, tmp_path, {"linux": [], "mounts": {}, "process": {"env": "x", "user": 3}, "hooks": []},
               edits())
    check_same(fast, tmp_path, {"linux": {"devices": None, "resources": 1}}, {})


def test_repeated_application_is_idempotent(fast: Path, tmp_path: Path) -> None:
    """A create retried on an edited config.json changes nothing."""
    once = c_apply(fast, tmp_path, base_config(), edits())
    assert isinstance(once, dict)
    assert c_apply(fast, tmp_path, once, edits()) == once


def test_mount_order(fast: Path, tmp_path: Path) -> None:
    """Parents before children, stable otherwise, depth of the normalised path
    (relative and odd destinations included)."""
    dests = ["/a/b/c", "/a", "rel/x", "", ".", "/", "//a/b", "/a/../b", "../up/x", "/a/b", "/z"]
    cfg = {"mounts": [{"destination": d, "source": str(i)} for i, d in enumerate(dests)] + [{"source": "none"}, 3]}
    got = check_same(fast, tmp_path, cfg, {})
    assert isinstance(got, dict) and got["mounts"][0] == {"destination": "/", "source": "5"}


def test_library_path(fast: Path, tmp_path: Path) -> None:
    """LD_LIBRARY_PATH from the hook's --folder alone, empty --folder= values, no update-ldcache."""
    hook = {"hookName": "createContainer", "path": "/h", "args": ["h", "update-ldcache", "--folder", "/l1",
                                                                  "--folder=", "--folder=/l2", "--folder"]}
    check_same(fast, tmp_path, {"process": {"env": ["A=1"]}}, {"hooks": [hook]})
    check_same(fast, tmp_path, {"process": {"env": ["LD_LIBRARY_PATH=/l2:/l2"]}}, {"hooks": [hook]})
    check_same(fast, tmp_path, {}, {"hooks": [dict(hook, args=["h", "--folder", "/l1"])]})
    check_same(fast, tmp_path, {}, {"env": ["LD_LIBRARY_PATH=", "LD_LIBRARY_PATH=:/a::/b:/a"]})


def test_fifo_and_block_nodes(fast: Path, tmp_path: Path) -> None:
    """A fifo gets no numbers and no rule; 'b' gets a b rule; 'u' a c rule."""
    e = {"deviceNodes": [{"path": "/dev/f", "type": "p", "fileMode": 0o600, "major": 1, "minor": 2},
                         {"path": "/dev/b", "type": "b", "major": 7, "minor": 0, "fileMode": 0o660, "uid": 5},
                         {"path": "/dev/u", "type": "u", "major": 8, "minor": 1, "fileMode": 0o600, "gid": 6,
                          "permissions": ""}]}
    check_same(fast, tmp_path, {}, e)


@pytest.mark.privileged
def test_host_nodes_without_numbers(fast: Path, tmp_path: Path) -> None:
    """Type, numbers and mode missing from the spec come from the host node (hostPath, else path)."""
    char, blk, fifo, regular = tmp_path / "char", tmp_path / "blk", tmp_path / "fifo", tmp_path / "file"
    os.mknod(char, 0o640 | stat.S_IFCHR, os.makedev(240, 7))
    os.mknod(blk, 0o600 | stat.S_IFBLK, os.makedev(7, 3))
    os.mkfifo(fifo, 0o644)
    regular.write_text("")
    try:
        nodes = [{"path": "/dev/a", "hostPath": str(char)},
                 {"path": "/dev/b", "hostPath": str(blk), "type": "b", "fileMode": 0o666},
                 {"path": "/dev/c", "hostPath": str(char), "major": 1, "minor": 2},
                 {"path": "/dev/d", "hostPath": str(fifo)},
                 {"path": str(char), "hostPath": ""},
                 {"path": "/dev/e", "hostPath": str(char), "type": "", "major": 1, "minor": 1, "fileMode": 1},
                 {"path": "/dev/f", "hostPath": str(char), "type": "c", "major": 1, "fileMode": 1, "uid": 3},
                 {"path": "/dev/g", "hostPath": str(char), "type": ""}]
        work = tmp_path / "w"
        work.mkdir()
        for node in nodes:
            assert isinstance(check_same(fast, work, {}, {"deviceNodes": [node]}), dict), node
        for bad in ({"path": "/dev/x", "hostPath": str(regular)}, {"path": "/dev/x", "hostPath": str(tmp_path / "no")},
                    {"path": "/dev/x", "hostPath": str(tmp_path)}):
            assert check_same(fast, work, {}, {"deviceNodes": [bad]})[0] == DEFER, bad
    finally:
        for p in (char, blk):
            p.unlink()


@pytest.mark.parametrize("bad", [
    {"deviceNodes": [{"path": "dev/x", "type": "c", "major": 1, "minor": 1, "fileMode": 1}]},
    {"deviceNodes": [{"type": "c", "major": 1, "minor": 1, "fileMode": 1}]},
    {"mounts": [{"hostPath": "/h", "containerPath": "rel"}]},
    {"mounts": [{"containerPath": "/c"}]},
    {"env": ["NOVALUE"]},
    {"env": ["=x"]},
    {"hooks": [{"hookName": "later", "path": "/h"}]},
    {"hooks": [{"hookName": "prestart", "path": "h"}]},
    {"hooks": [{"hookName": 3, "path": "/h"}]},
])
def test_malformed_edits_are_deferred(fast: Path, tmp_path: Path, bad: Dict[str, Any]) -> None:
    assert check_same(fast, tmp_path, base_config(), bad)[0] == DEFER


def test_bad_config_mount_is_deferred(fast: Path, tmp_path: Path) -> None:
    """A mount destination that is not a string: Python refuses (runc would too)."""
    for dst in (None, 5, ["/x"]):
        assert check_same(fast, tmp_path, {"mounts": [{"destination": dst}]}, {})[0] == DEFER


@pytest.mark.parametrize("text, key", [
    ('{"process":{"env":["A=1"],"env":["B=2"]}}', "env"),
    ('{"annotations":{"a":"1","b":"2","a":"3"}}', "a"),
    ('{"big":{' + ",".join(f'"k{i % 40}":{i}' for i in range(100)) + '}}', "k0"),
])
def test_duplicate_keys_refused(fast: Path, tmp_path: Path, text: str, key: str) -> None:
    """A repeated key is refused, never resolved: json.loads keeps its last value in its
    first place, runc's Go decoder merges the objects; the wrapper must not guess."""
    got = c_apply(fast, tmp_path, text, edits())
    assert got[0] == DEFER and f'duplicate key "{key}"' in got[1], got


def test_unsigned_64_bit_values_kept(fast: Path, tmp_path: Path) -> None:
    """docker --ulimit memlock=-1 writes RLIM_INFINITY as Go's uint64(-1): the
    rewritten config.json keeps it exactly (runc would refuse a rounded float)."""
    inf = 2**64 - 1
    config = {"process": {"rlimits": [{"type": "RLIMIT_MEMLOCK", "hard": inf, "soft": inf}]},
              "linux": {"resources": {"memory": {"swappiness": inf}}}}
    got = c_apply(fast, tmp_path, config, edits())
    assert got["process"]["rlimits"] == config["process"]["rlimits"]
    assert got["linux"]["resources"]["memory"]["swappiness"] == inf


# Python accepts these, C defers on purpose (rare, and their spelling would need guessing)
CONSERVATIVE = [
    ("a float that is infinite for Python (jsondump refuses it: so does C)", '{"x":1e400}', {}),
    ("node number not an integer", "{}", {"deviceNodes": [{"path": "/d", "type": "c", "major": 1.0, "minor": 1,
                                                           "fileMode": 1}]}),
    ("uid null", "{}", {"deviceNodes": [{"path": "/d", "type": "c", "major": 1, "minor": 1, "fileMode": 1,
                                         "uid": None}]}),
    ("options not a list", "{}", {"mounts": [{"hostPath": "/h", "containerPath": "/c", "options": "ro"}]}),
    ("mount type not a string", "{}", {"mounts": [{"hostPath": "/h", "containerPath": "/c", "type": 1}]}),
    ("hook args not a list", "{}", {"hooks": [{"hookName": "prestart", "path": "/h", "args": "update-ldcache"}]}),
    ("--folder value not a string", "{}", {"hooks": [{"hookName": "prestart", "path": "/h",
                                                      "args": ["update-ldcache", "--folder", 3]}]}),
]


@pytest.mark.parametrize("why, text, e", CONSERVATIVE, ids=[c[0] for c in CONSERVATIVE])
def test_conservative_deferrals(fast: Path, tmp_path: Path, why: str, text: str, e: Dict[str, Any]) -> None:
    assert c_apply(fast, tmp_path, text, e)[0] == DEFER


# a bounded random mix of the above: small vocabularies so that collisions happen
_paths = st.sampled_from(["/dev/xpu0", "/dev/xpu1", "/dev/xpuctrl", "/dev/null"])
_dests = st.sampled_from(["/usr/local/xpu", "/usr/local/xpu/", "/usr/local/xpu/lib", "//usr/local/xpu", "/opt",
                          "/opt/../usr", "/", "rel", "/proc"])
_env = st.sampled_from(["A=1", "A=2", "B=", "LD_LIBRARY_PATH=/l1", "LD_LIBRARY_PATH=/l2:/l1", "C=x=y"])
_ints = st.integers(min_value=0, max_value=3)
_node = st.fixed_dictionaries({"path": _paths, "type": st.sampled_from(["c", "b", "p", "u"]), "major": _ints,
                               "minor": _ints, "fileMode": st.sampled_from([0o666, 0o600])},
                              optional={"permissions": st.sampled_from(["rw", "rwm", ""]), "uid": _ints,
                                        "gid": _ints, "hostPath": _paths})
_mount = st.fixed_dictionaries({"hostPath": st.sampled_from(["/h1", "/h2"]), "containerPath": _dests.filter(
    lambda d: d.startswith("/"))}, optional={"options": st.lists(st.sampled_from(["ro", "bind", "rbind", "nodev"]),
                                                                 max_size=3),
                                             "type": st.sampled_from(["", "bind", "tmpfs"])})
_hook = st.fixed_dictionaries({"hookName": st.sampled_from(["prestart", "createContainer"]), "path": st.just("/h")},
                              optional={"args": st.lists(st.sampled_from(["h", "update-ldcache", "--folder", "/l1",
                                                                          "--folder=/l3"]), max_size=5),
                                        "timeout": _ints})
_edits = st.fixed_dictionaries({}, optional={"env": st.lists(_env, max_size=3),
                                             "deviceNodes": st.lists(_node, max_size=3),
                                             "mounts": st.lists(_mount, max_size=3),
                                             "hooks": st.lists(_hook, max_size=2),
                                             "additionalGids": st.lists(_ints, max_size=2, unique=True)})
_config = st.fixed_dictionaries({}, optional={
    "process": st.fixed_dictionaries({}, optional={"env": st.lists(_env, max_size=4),
                                                   "user": st.fixed_dictionaries({}, optional={
                                                       "additionalGids": st.lists(_ints, max_size=2)})}),
    "mounts": st.lists(st.fixed_dictionaries({"destination": _dests, "source": st.just("s")}), max_size=4),
    "linux": st.fixed_dictionaries({}, optional={"devices": st.lists(st.fixed_dictionaries({"path": _paths}),
                                                                     max_size=2)}),
    "hooks": st.fixed_dictionaries({}, optional={"prestart": st.lists(st.fixed_dictionaries({"path": st.just("/h")}),
                                                                      max_size=1)}),
})


@SETTINGS
@given(config=_config, e=_edits)
def test_property_same_as_python(fast: Path, tmp_path: Path, config: Dict[str, Any], e: Dict[str, Any]) -> None:
    """Within this domain C never needs to defer: its result is Python's, applied once or twice."""
    got = c_apply(fast, tmp_path, config, e)
    assert got == py_apply(config, e)
    assert isinstance(got, dict)
    assert c_apply(fast, tmp_path, got, e) == got


# -- argv --------------------------------------------------------------------


def py_split(args: Sequence[str]) -> Dict[str, Any]:
    i, command = wrapper.split_command(list(args))
    return {"index": i, "command": command, "bundle": wrapper.option_value(list(args), i + 1, wrapper._BUNDLE_OPTIONS),
            "log": wrapper.option_value(list(args), 0, ("--log", "-log"))}


SPLITS = [
    ["--root", "/r", "--log", "/l", "--log-format", "json", "create", "--bundle", "/b", "id"],
    ["--systemd-cgroup", "run", "-b", "x", "id"],
    ["--debug", "--root=/r", "state", "id"],
    ["--version"], [], ["--"], ["--", "create", "-b", "/b"], ["create", "--", "-b", "/b"],
    ["create", "--bundle"], ["create", "--bundle", "--bundle=/c"], ["create", "-bundle=/d", "-b", "/e"],
    ["-log", "/l", "-root", "/r", "run", "--pid-file", "/p", "--bundle=", "x"], ["", "create"],
    ["--log=/x", "--log", "create", "-b", "/b"], ["--root"], ["--criu", "c", "--rootless", "true", "delete", "x"],
]


@pytest.mark.parametrize("args", SPLITS)
def test_split_command(fast: Path, args: List[str]) -> None:
    assert json.loads(ctest(fast, "split", *args)) == py_split(args)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["--root", "/r", "--log", "--log=/x", "-log", "-b", "--bundle", "--bundle=/b",
                                 "-bundle", "-bundle=", "create", "run", "state", "--", "--debug", "x", "-",
                                 "--log-format", "--cgroup-manager"]), max_size=8))
def test_split_command_property(fast: Path, args: List[str]) -> None:
    assert json.loads(ctest(fast, "split", *args)) == py_split(args)


def test_spec_dirs(fast: Path) -> None:
    for value in (None, "", ":", "/a::/b", "/a/:/a"):
        env = {} if value is None else {"XPU_CDI_SPEC_DIRS": value}
        assert ctest(fast, "spec-dirs", env=env).splitlines() == wrapper.spec_dirs(env)


# -- may_request -------------------------------------------------------------


@pytest.fixture
def index_dirs(tmp_path: Path) -> List[str]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x.json.xpu-cdi").write_text(json.dumps({"xpuCdiIndex": 1, "kind": "v.com/x",
                                                  "selection": {"env": ["MY_CARDS", "OTHER_1"]}}))
    (a / "not-an-index.json").write_text('"SPEC_ONLY"')
    (b / ".xpu-cdi").write_bytes(b'HEAD_TOKEN"x"' + b" " * (1 << 20) + b'"BEYOND_LIMIT"')
    (b / "dir.xpu-cdi").mkdir()
    return [str(a), str(b), str(tmp_path / "missing")]


MAY = [
    '{"process":{"env":["PATH=/bin","HOME=/root"]}}',
    '{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]}}',
    '{"process":{"env":["ASCEND_VISIBLE_DEVICES="]}}',
    '{"process":{"env":["xpu_visible_devices=1"]}}',
    '{"process":{"env":["MY_CARDS=1"]}}',
    '{"process":{"env":["MY_CARDS_X=1","OTHER_1 =1"," OTHER_1=1"]}}',
    '{"process":{"env":["OTHER_1=1"]}}',
    '{"annotations":{"cdi.k8s.io/x":"v.com/x=1"}}',
    '{"a":"cdi.k8s.io"}',
    '{"process":{"env":["HEAD_TOKEN=1"]}}',
    '{"process":{"env":["BEYOND_LIMIT=1"]}}',
    '{"process":{"env":["SPEC_ONLY=1"]}}',
    '"MY_CARDS=',
    'MY_CARDS=',
    '"x":"\\"MY_CARDS=1"',
    "",
]


@pytest.mark.parametrize("text", MAY)
def test_may_request(fast: Path, tmp_path: Path, index_dirs: List[str], text: str) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(text)
    want = bundle.may_request(text.encode(), index_dirs)
    assert ctest(fast, "may-request", str(cfg), *index_dirs) == f"{int(want)}\n"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(['"', "=", "MY_CARDS", "OTHER_1", "CXPU_VISIBLE_DEVICES", "A", "a", "_", "1",
                                 "cdi.k8s", ".io", " ", "\\"]), max_size=12))
def test_may_request_property(fast: Path, tmp_path: Path, index_dirs: List[str], parts: List[str]) -> None:
    text = "".join(parts)
    cfg = tmp_path / "config.json"
    cfg.write_text(text)
    want = bundle.may_request(text.encode(), index_dirs)
    assert ctest(fast, "may-request", str(cfg), *index_dirs) == f"{int(want)}\n"


# -- find_runtime ------------------------------------------------------------


def py_find(env: Dict[str, str], self_path: str) -> str:
    try:
        return wrapper.find_runtime(env, self_path)
    except XpuCdiError:
        return DEFER


def c_find(fast: Path, env: Dict[str, str], self_path: str, cwd: Path) -> str:
    r = subprocess.run([str(fast), "ociedit", "find-runtime", self_path], capture_output=True, text=True,
                       env=env, cwd=cwd, timeout=30)
    assert r.returncode == 0, r.stderr
    return DEFER if r.stdout.startswith(DEFER + " ") else r.stdout.rstrip("\n")


def test_find_runtime(fast: Path, tmp_path: Path) -> None:
    """Same answer as Python: XPU_CDI_RUNTIME as given, copies of the wrapper on PATH skipped."""
    me = tmp_path / "bin" / "xpu-container-runtime"
    me.parent.mkdir()
    me.write_text("#!/bin/sh\n")
    me.chmod(0o755)
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for d in (a, b, c):
        d.mkdir()
    os.symlink(me, a / "runc")
    (b / "runc").write_text("#!/bin/sh\n")
    (b / "runc").chmod(0o755)
    (c / "runc").write_text("not executable")
    (c / "crun").mkdir()
    (tmp_path / "runc").write_text("#!/bin/sh\n")
    (tmp_path / "runc").chmod(0o755)
    cases = [
        {"PATH": f"{a}:{b}"}, {"PATH": f"{c}:{a}/:{b}/"}, {"PATH": f"{a}:{c}"}, {"PATH": f"{a}::{b}"},
        {"PATH": f"::{b}"}, {"PATH": f"{c}", "XPU_CDI_RUNTIME": "crun"}, {"PATH": f"{b}", "XPU_CDI_RUNTIME": ""},
        {"XPU_CDI_RUNTIME": str(b / "runc")}, {"XPU_CDI_RUNTIME": str(a / "runc")},
        {"XPU_CDI_RUNTIME": str(c / "runc")}, {"XPU_CDI_RUNTIME": str(c / "crun")},
        {"XPU_CDI_RUNTIME": "./runc"}, {"XPU_CDI_RUNTIME": str(me)}, {"PATH": ""}, {},
    ]
    cwd = Path.cwd()
    for env in cases:
        os.chdir(tmp_path)  # os.path.join(d or ".", name): relative to the cwd
        try:
            want = py_find(env, str(me))
        finally:
            os.chdir(cwd)
        assert c_find(fast, env, str(me), tmp_path) == want, env


def test_find_runtime_skips_the_python_half(fast: Path, tmp_path: Path) -> None:
    """With the compiled front end, <binary>.py on PATH is the wrapper too."""
    me = tmp_path / "xpu-container-runtime"
    me.write_text("")
    me.chmod(0o755)
    Path(f"{me}.py").write_text("#!/bin/sh\n")
    Path(f"{me}.py").chmod(0o755)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    os.symlink(f"{me}.py", a / "runc")
    (b / "runc").write_text("#!/bin/sh\n")
    (b / "runc").chmod(0o755)
    assert c_find(fast, {"PATH": f"{a}:{b}"}, str(me), tmp_path) == str(b / "runc")


# -- the atomic write --------------------------------------------------------


def test_write_keeps_mode_and_leaves_no_temp(fast: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_bytes(b'{"new":1}')
    target = tmp_path / "bundle" / "config.json"
    target.parent.mkdir()
    target.write_text("old")
    old = os.umask(0o077)
    try:
        for mode in (0o640, 0o604, 0o4755):
            assert ctest(fast, "write", str(target), oct(mode)[2:], str(data)) == "OK\n"
            assert target.read_bytes() == b'{"new":1}'
            assert stat.S_IMODE(target.stat().st_mode) == mode
    finally:
        os.umask(old)
    assert sorted(p.name for p in target.parent.iterdir()) == ["config.json"]


def write_as_pid(fast: Path, target: Path, data: Path, plant: str = "") -> Tuple[int, str]:
    """Run `ociedit write` through `sh -c 'exec ...'`, so that its pid (the
    shell's $$) is known and a file can be planted at its temp name first."""
    script = f'echo $$; {plant} exec "$0" ociedit write "$1" 644 "$2"'
    r = subprocess.run(["sh", "-c", script, str(fast), str(target), str(data)], capture_output=True, text=True,
                       timeout=30, cwd=target.parent)
    assert r.returncode == 0, r.stderr
    pid, out = r.stdout.split("\n", 1)
    return int(pid), out


def temp_name(path: Path, pid: int, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as m:
        m.setattr(os, "getpid", lambda: pid)
        return atomic.temp_name(str(path))


def test_write_failure_removes_the_temp_file(fast: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rename onto a non-empty directory fails: the temp file, named as
    atomic.temp_name names it, is removed again."""
    data = tmp_path / "data"
    data.write_bytes(b"{}")
    target = tmp_path / "bundle" / "config.json"
    (target / "sub").mkdir(parents=True)
    pid, out = write_as_pid(fast, target, data)
    assert out.startswith(DEFER + " ") and temp_name(target, pid, monkeypatch) in out, out
    assert sorted(p.name for p in target.parent.iterdir()) == ["config.json"]


def test_write_never_writes_through_a_planted_temp_file(fast: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A symlink (or file) already at the temp name is not followed nor
    truncated: the write defers and leaves it alone."""
    data = tmp_path / "data"
    data.write_bytes(b"{}")
    victim = tmp_path / "victim"
    victim.write_text("keep")
    target = tmp_path / "bundle" / "config.json"
    target.parent.mkdir()
    target.write_text("old")
    pid, out = write_as_pid(fast, target, data, plant=f'ln -s {victim} .config.json.$$.xpu-cdi-tmp;')
    assert out.startswith(DEFER + " "), out
    assert victim.read_text() == "keep" and target.read_text() == "old"
    assert os.path.islink(temp_name(target, pid, monkeypatch))


def test_write_into_a_missing_dir_defers(fast: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_bytes(b"{}")
    out = ctest(fast, "write", str(tmp_path / "missing" / "config.json"), "644", str(data))
    assert out.startswith(DEFER + " ")
    assert not (tmp_path / "missing").exists()


# -- prepare -----------------------------------------------------------------


def spec(cards: int) -> Dict[str, Any]:
    devices = [{"name": str(i), "containerEdits": {"deviceNodes": [
        {"path": f"/dev/xpu{i}", "hostPath": f"/host/dev/xpu{i}", "type": "c", "major": 240, "minor": i,
         "fileMode": 438, "permissions": "rwm"}]}} for i in range(cards)]
    return {"cdiVersion": "0.5.0", "kind": "kunlunxin.com/xpu", "devices": devices, "containerEdits": {
        "deviceNodes": [{"path": "/dev/xpuctrl", "hostPath": "/host/dev/xpuctrl", "type": "c", "major": 240,
                         "minor": 200, "fileMode": 438, "permissions": "rwm"}],
        "mounts": [{"hostPath": "/host/usr/local/xpu", "containerPath": "/usr/local/xpu",
                    "options": ["ro", "nosuid", "nodev", "bind"]}],
        "env": ["XPU_DRIVER=1"], "additionalGids": [44],
        "hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                   "args": ["xpu-cdi-hook", "update-ldcache", "--folder", "/usr/local/xpu/lib64"],
                   "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "timeout": 10}]}}


def index(cards: int) -> Dict[str, Any]:
    return {"xpuCdiIndex": 1, "kind": "kunlunxin.com/xpu", "profile": "kunlunxin",
            "selection": {"env": ["CXPU_VISIBLE_DEVICES", "CXPU_VISIBLE_DEVICES"], "aliases": None,
                          "none": ["", "void", "none"]},
            "indices": {str(i): str(i) for i in range(cards)}, "all": None, "spec": "kunlunxin.com-xpu.json"}


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "kunlunxin.com-xpu.json").write_text(json.dumps(spec(8)))
    (d / "kunlunxin.com-xpu.json.xpu-cdi").write_text(json.dumps(index(8)))
    return d


@pytest.mark.parametrize("env, ann, edited", [
    (["PATH=/bin"], {}, False),
    (["PATH=/bin", "CXPU_VISIBLE_DEVICES=void"], {}, False),
    (["PATH=/bin", "CXPU_VISIBLE_DEVICES=0-7"], {}, True),
    (["PATH=/bin", "CXPU_VISIBLE_DEVICES=3,1"], {"cdi.k8s.io/x": "kunlunxin.com/xpu=5"}, True),
    (["PATH=/bin", "CXPU_VISIBLE_DEVICES=2", "LD_LIBRARY_PATH=/app"], {}, True),
    (["CXPU_VISIBLE_DEVICES=9"], {}, None),
    (["ASCEND_VISIBLE_DEVICES=0"], {}, None),
    (["ASCEND_VISIBLE_DEVICES= none "], {}, False),
])
def test_prepare(fast: Path, tmp_path: Path, spec_dir: Path, env: List[str], ann: Dict[str, str],
                 edited: Optional[bool]) -> None:
    """config.json as the Python wrapper writes it; untouched when nothing is asked;
    deferred when Python refuses (None)."""
    cfg = {"ociVersion": "1.0.2", "process": {"env": env, "args": ["sh"]}, "root": {"path": "rootfs"},
           "annotations": ann, "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}}
    text = json.dumps(cfg, indent=1)
    c_bundle, py_bundle = tmp_path / "c", tmp_path / "py"
    for b in (c_bundle, py_bundle):
        b.mkdir()
        (b / "config.json").write_text(text)
        (b / "config.json").chmod(0o600)
    denv = {"XPU_CDI_SPEC_DIRS": str(spec_dir)}
    out = ctest(fast, "prepare", str(c_bundle), env=denv)
    try:
        wrapper.prepare(str(py_bundle), denv)
    except XpuCdiError:
        assert edited is None and out.startswith(DEFER + " ")
        assert (c_bundle / "config.json").read_text() == text
        return
    assert out == f"OK {int(bool(edited))}\n"
    if not edited:
        assert (c_bundle / "config.json").read_text() == text == (py_bundle / "config.json").read_text()
    assert json.loads((c_bundle / "config.json").read_text()) == json.loads((py_bundle / "config.json").read_text())
    assert stat.S_IMODE((c_bundle / "config.json").stat().st_mode) == 0o600
    assert sorted(p.name for p in c_bundle.iterdir()) == ["config.json"]
