"""Properties of the compiled binaries' inputs, black-box (bounded, for the suite; the
parsers' coverage-guided fuzzing is fuzz/native/): whatever OCI state, config.json or
selection value a container brings, `xpu-cdi-hook prestart` and `xpu-container-runtime
create` end with exit 0, or exit 1 and one line naming themselves; never a crash, a
second line or a half-written config.json."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from fuzzcontract import FUZZ, file_contents, json_values, mutated
from hypothesis import example, given
from hypothesis import strategies as st

from support.hookkit import hook_binary
from support.wrapper_specs import spec_dir

STATE = {"ociVersion": "1.0.2", "id": "c1", "status": "creating", "pid": 0, "bundle": "/tmp/b",
         "annotations": {"cdi.k8s.io/p_1": "kunlunxin.com/xpu=1"}}
CONFIG = {"ociVersion": "1.0.2", "root": {"path": "rootfs", "readonly": False},
          "process": {"env": ["PATH=/bin", "CXPU_VISIBLE_DEVICES=1,3"], "args": ["true"]},
          "annotations": {"cdi.k8s.io/p_1": "kunlunxin.com/xpu=1"}, "mounts": [], "linux": {}}
TOKENS = st.sampled_from(["0", "1", "3", "9", "0-3", "3-1", "all", "ALL", "void", "none", "", " ", ",", "-",
                          "npu-1", "Ascend910-0", "kunlunxin.com/xpu=1", "4095", "0-4095", "99999999"])
VALUES = st.one_of(st.lists(TOKENS, max_size=6).map(",".join), st.text(max_size=40))


def no_host_pid(value: Any) -> Any:
    """A state whose pid could name a real host process is given pid 0: the property is about
    parsing, and prestart on a real pid would inject into that process."""
    if isinstance(value, dict) and isinstance(value.get("pid"), int) and not isinstance(value.get("pid"), bool):
        return dict(value, pid=0)
    return value


def one_line_or_nothing(name: str, r: subprocess.CompletedProcess) -> str:
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode in (0, 1), (r.returncode, err)  # not a signal, not another code
    if r.returncode == 1:
        assert err.startswith(f"{name}: ") and err.count("\n") == 1 and err.endswith("\n"), err
    return err


def hook(state: bytes, config: "bytes | None") -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="xpu-cdi-prop-") as tmp:
        base = Path(tmp)
        (base / "b" / "rootfs").mkdir(parents=True)
        if config is not None:
            (base / "b" / "config.json").write_bytes(config)
        data = state.replace(b"/tmp/b", str(base / "b").encode())
        return subprocess.run([hook_binary("xpu-cdi-hook"), "prestart"], input=data, capture_output=True,
                              timeout=30, env={"PATH": "", "XPU_CDI_SPEC_DIRS": str(spec_dir(base / "cdi"))})


def wrapper(config: bytes) -> "tuple[subprocess.CompletedProcess, bytes, bytes]":
    with tempfile.TemporaryDirectory(prefix="xpu-cdi-prop-") as tmp:
        base = Path(tmp)
        (base / "b" / "rootfs").mkdir(parents=True)
        (base / "b" / "config.json").write_bytes(config)
        r = subprocess.run([hook_binary("xpu-container-runtime"), "create", "--bundle", str(base / "b"), "c1"],
                           capture_output=True, timeout=30, stdin=subprocess.DEVNULL,
                           env={"PATH": "", "XPU_CDI_RUNTIME": "/bin/true",
                                "XPU_CDI_SPEC_DIRS": str(spec_dir(base / "cdi"))})
        return r, config, (base / "b" / "config.json").read_bytes()


@FUZZ
@given(state=st.one_of(file_contents(deep=False),
                       st.one_of(st.just(STATE).flatmap(mutated), json_values).map(no_host_pid)
                       .map(lambda v: json.dumps(v).encode())),
       config=st.one_of(st.none(), file_contents(deep=False), st.just(CONFIG).flatmap(mutated)
                        .map(lambda v: json.dumps(v).encode())))
@example(state=json.dumps(STATE).encode(), config=json.dumps(CONFIG).encode())
@example(state=b'{"id":"c","bundle":"/tmp/b","pid":1e400}', config=None)
def test_hook_any_state_and_config(state: bytes, config: "bytes | None") -> None:
    one_line_or_nothing("xpu-cdi-hook", hook(state, config))


@FUZZ
@given(config=st.one_of(file_contents(deep=False).map(lambda b: b + b' "CXPU_VISIBLE_DEVICES=1"'),
                        st.just(CONFIG).flatmap(mutated).map(lambda v: json.dumps(v).encode())))
@example(config=json.dumps(CONFIG).encode())
def test_wrapper_any_config(config: bytes) -> None:
    """Refused: config.json as it was.  Accepted: a JSON object."""
    r, before, after = wrapper(config)
    one_line_or_nothing("xpu-container-runtime", r)
    if r.returncode == 1:
        assert after == before
    elif after != before:
        assert isinstance(json.loads(after), dict)


@FUZZ
@given(value=VALUES)
@example(value="0-4095")
@example(value="1,\u00e9")
@example(value="\x00")
def test_wrapper_any_selection_value(value: str) -> None:
    """Any value of the selection variable: the cards it names (all of them from the spec), or one line
    naming the variable."""
    config = json.dumps(dict(CONFIG, process={"env": [f"CXPU_VISIBLE_DEVICES={value}"]}, annotations={})).encode()
    r, _before, after = wrapper(config)
    err = one_line_or_nothing("xpu-container-runtime", r)
    if r.returncode == 1:
        # an entry with NUL cannot reach execve: refused as such, whatever the variable
        want = "process.env: an entry with NUL" if "\x00" in value else "CXPU_VISIBLE_DEVICES="
        assert err.startswith(f"xpu-container-runtime: {want}"), err
    else:
        nodes = [d["path"] for d in json.loads(after).get("linux", {}).get("devices", [])]
        assert set(nodes) <= {f"/dev/xpu{i}" for i in range(4)} | {"/dev/xpuctrl"}, nodes
