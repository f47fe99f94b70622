"""The compiled hook alone (no Python beside it) on selection input: it
answers "nothing asked" at once, reads a request (refused here for its
state pid 0), or refuses the input in one line -- and the tooling's
reader (hook.select) agrees with each answer.  The bad inputs one by
one, with their exact messages: tests/hook/test_prestart_binary.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookkit import HookHost, install_launcher
from xpu_cdi.errors import XpuCdiError
from xpu_cdi.hook import select, state

pytestmark = pytest.mark.privileged  # fake hosts have device nodes



@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> HookHost:
    base = tmp_path_factory.mktemp("fast-hook")
    (base / "bin").mkdir()
    front = install_launcher(base / "bin")
    h = HookHost(base / "xpu", front, "kunlunxin", 8)
    yield h
    import fakehost

    fakehost.remove_tree(h.base)


@pytest.fixture(scope="module")
def front_only(host: HookHost, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled front end without its Python half."""
    d = tmp_path_factory.mktemp("front-only")
    path = d / "xpu-cdi-hook"
    path.write_bytes(host.hook.read_bytes())
    path.chmod(0o755)
    return path


def bundle(base: Path, config: Any) -> Path:
    b = base / "bundle"
    b.mkdir(exist_ok=True)
    (b / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    (b / "rootfs").mkdir(exist_ok=True)
    return b


def run(hook: Path, host: HookHost, st_: Any, log: Path) -> subprocess.CompletedProcess:
    data = st_ if isinstance(st_, bytes) else json.dumps(st_).encode()
    return subprocess.run([str(hook), "prestart", "--log", str(log)], input=data, capture_output=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "XPU_CDI_SPEC_DIRS": str(host.spec_dir)})


def python_wants(st_: Dict[str, Any], b: Path, dirs: List[str]) -> Optional[List[str]]:
    """What the Python hook would select, or None when it refuses the input."""
    try:
        c = state.container(state.parse_state(json.dumps(st_).encode()), state.read_config(str(b)))
        return select.requested(c.env, c.annotations, select.load_indexes(dirs))
    except XpuCdiError:
        return None


def test_nothing_asked_is_answered_without_python(host: HookHost, front_only: Path, tmp_path: Path) -> None:
    b = bundle(tmp_path, {"root": {"path": "rootfs"}, "process": {"env": ["PATH=/bin", "CXPU_VISIBLE_DEVICES=void"]}})
    r = run(front_only, host, {"ociVersion": "1.0.2", "id": "c1", "pid": 0, "bundle": str(b)}, tmp_path / "log")
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert not (tmp_path / "log").exists()  # nothing asked: nothing logged, nothing touched


def test_request_with_pid_0_is_refused_by_the_front_end(host: HookHost, front_only: Path, tmp_path: Path) -> None:
    """A request whose state pid is 0 (crun's createContainer state): one line, no Python."""
    b = bundle(tmp_path, {"root": {"path": "rootfs"}, "process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}})
    r = run(front_only, host, {"id": "c1", "pid": 0, "bundle": str(b)}, tmp_path / "log")
    assert r.returncode == 1 and r.stderr.decode() == (
        "xpu-cdi-hook: OCI state pid 0 is not a container process of this runtime (a createContainer hook runs "
        "inside the container): register `xpu-cdi-hook prestart` as a prestart or createRuntime hook\n")


ENV_ITEM = st.one_of(
    st.sampled_from(["PATH=/bin", "CXPU_VISIBLE_DEVICES=", "CXPU_VISIBLE_DEVICES=void", "CXPU_VISIBLE_DEVICES=1,3",
                     "CXPU_VISIBLE_DEVICES=none", "ASCEND_VISIBLE_DEVICES=0", "CXPU_VISIBLE_DEVICES", "=x"]),
    st.builds(lambda v: f"CXPU_VISIBLE_DEVICES={v}", st.text(alphabet="0123456789,- alvoid", max_size=8)),
    st.text(max_size=12),
)
ANNOTATIONS = st.dictionaries(
    st.one_of(st.sampled_from(["cdi.k8s.io/a", "cdi.k8s.io/b_1", "cdi.k8s.io/", "other", "cdi.k8s.io/x\n"]),
              st.text(max_size=8)),
    st.one_of(st.sampled_from(["kunlunxin.com/xpu=1", "kunlunxin.com/xpu=1,kunlunxin.com/xpu=2", "", "x"]),
              st.text(max_size=8)),
    max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(env=st.lists(ENV_ITEM, max_size=4), ann_state=st.one_of(st.none(), ANNOTATIONS),
       ann_config=st.one_of(st.none(), ANNOTATIONS))
def test_answers_match_python(host: HookHost, front_only: Path, tmp_path_factory: pytest.TempPathFactory,
                              env: List[str], ann_state: Any, ann_config: Any) -> None:
    """The binary and the tooling's reader (hook.select) agree: nothing asked, a request, or a refusal."""
    base = tmp_path_factory.mktemp("prop")
    config: Dict[str, Any] = {"root": {"path": "rootfs"}, "process": {"env": env}}
    if ann_config is not None:
        config["annotations"] = ann_config
    b = bundle(base, config)
    st_: Dict[str, Any] = {"id": "c1", "pid": 0, "bundle": str(b)}
    if ann_state is not None:
        st_["annotations"] = ann_state
    r = run(front_only, host, st_, base / "log")
    wants = python_wants(st_, b, [str(host.spec_dir)])
    if r.returncode == 0:
        assert wants == [], (env, ann_state, ann_config, wants)
    elif b"is not a container process" in r.stderr:  # a request the front end read, refused for its pid 0
        assert wants, (env, ann_state, ann_config, r.stderr)
    else:  # refused: one line, and for plain text only what the tooling refuses as well
        assert r.returncode == 1 and r.stderr.decode().count("\n") == 1, r.stderr
        texts = [*env, *(k + v for a in (ann_state, ann_config) if a for k, v in a.items())]
        declined_by_design = any(c == "\0" or not c.isascii() for t in texts for c in t)  # NUL, non-ASCII
        assert wants is None or declined_by_design, ("the hook refused input the tooling reads", r.stderr, wants)
