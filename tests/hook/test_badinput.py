"""Bad inputs to `xpu-cdi-hook prestart`, run directly with a crafted OCI
state: each gives one clear line on stderr and exit 1 (or success where a
broken file must simply be skipped), and nothing is created."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from hookkit import HookHost, hook_launcher, tree, xpu, xpu_shared  # noqa: F401

pytestmark = [pytest.mark.privileged]


class Case:
    """One test's view of a host: its spec dir, and a private bundle dir and log."""

    def __init__(self, host: HookHost, base: Path) -> None:
        self.host, self.base, self.spec_dir, self.log = host, base, host.spec_dir, base / "hook.log"

    def run_hook(self, st: Any) -> "Any":
        return self.host.run_hook(st, log=self.log)

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@pytest.fixture
def case(xpu_shared: HookHost, tmp_path: Path) -> Case:
    """The module's shared host (its spec dir is only read) with this test's own bundle and log."""
    return Case(xpu_shared, tmp_path)


@pytest.fixture
def own(xpu: HookHost, tmp_path: Path) -> Case:
    """A host of this test's own: for tests that change its spec dir."""
    return Case(xpu, tmp_path)


def bundle(base: Path, env: List[str], annotations: Optional[Dict[str, str]] = None,
           root: Any = "rootfs") -> Path:
    """A bundle dir with config.json (no runtime needed for these tests)."""
    d = base / "bundle"
    (d / "rootfs" / "dev").mkdir(parents=True, exist_ok=True)
    config: Dict[str, Any] = {"ociVersion": "1.0.2", "process": {"env": ["PATH=/bin", *env], "args": ["true"]},
                              "annotations": annotations or {}}
    if root is not None:
        config["root"] = {"path": root}
    (d / "config.json").write_text(json.dumps(config))
    return d


def state(b: Path, pid: int = 0) -> Dict[str, Any]:
    return {"ociVersion": "1.0.2", "id": "bad-input", "status": "creating", "pid": pid or os.getpid(),
            "bundle": str(b)}


def fails(xpu: Case, st: Any, *needles: str) -> str:
    before = tree(xpu.base / "bundle") if (xpu.base / "bundle").exists() else []
    r = xpu.run_hook(st)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xpu-cdi-hook: "), err
    for needle in needles:
        assert needle in lines[0], err
    assert f"error: {lines[0][len('xpu-cdi-hook: '):]}" in xpu.log_text()
    if before:
        assert tree(xpu.base / "bundle") == before, "the hook changed the bundle"
    return lines[0]


class TestState:
    @pytest.mark.parametrize("data, needle", [
        (b'{"id": "x", "pid": 1', "not valid JSON"),
        (b'{"id": "x", "pid": 12, "bundle": "/tmp"} trailing', "not valid JSON"),
        (b"", "no OCI state on stdin"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"pid": 1, "bundle": "/tmp"}', "'id' must be a non-empty string"),
        (b'{"id": "x", "pid": 1, "bundle": "relative/dir"}', "'bundle' must be an absolute path"),
        (b'{"id": "x", "pid": -4, "bundle": "/tmp"}', "'pid' must be a non-negative integer"),
        (b'{"id": "x", "pid": true, "bundle": "/tmp"}', "'pid' must be a non-negative integer"),
        (b"\xff\xfe{}", "not valid JSON"),
        (b"[" * 100000 + b"]" * 100000, "nested deeper than 100 levels"),
    ], ids=["truncated", "trailing", "empty", "array", "no-id", "relative-bundle", "negative-pid", "bool-pid",
            "not-utf8", "deep"])
    def test_malformed_state(self, case: Case, data: bytes, needle: str) -> None:
        """Malformed or truncated state JSON is refused with the reason."""
        fails(case, data, needle)

    def test_oversized_state(self, case: Case) -> None:
        """A state over the 1 MiB limit is not parsed."""
        fails(case, b'{"id": "' + b"x" * (2 << 20) + b'"}', "larger than 1048576 bytes")

    def test_missing_bundle(self, case: Case) -> None:
        """A bundle that does not exist: named, with the errno text."""
        fails(case, state(case.base / "nowhere"), "nowhere", "cannot open config.json: No such file or directory")

    def test_config_without_root(self, case: Case) -> None:
        """config.json without root (and no crun state root): no rootfs to work on."""
        fails(case, state(bundle(case.base, ["CXPU_VISIBLE_DEVICES=1"], root=None)), "has no root.path")

    def test_config_nested_too_deeply(self, case: Case) -> None:
        """A config.json nested 100,000 deep is refused, not a crash."""
        b = bundle(case.base, [])
        (b / "config.json").write_text("[" * 100000 + "]" * 100000)
        fails(case, state(b), "nested deeper than 100 levels")

    def test_config_not_json(self, case: Case) -> None:
        """A config.json that is not JSON."""
        b = bundle(case.base, [])
        (b / "config.json").write_text("{oops")
        fails(case, state(b), "config.json' is not valid JSON")


class TestSelection:
    @pytest.mark.parametrize("env, needles", [
        (["CXPU_VISIBLE_DEVICES=9"], ["no card 9 in the kunlunxin.com/xpu spec", "cards: 0,1,2,3,4,5,6,7"]),
        (["CXPU_VISIBLE_DEVICES=1,x"], ["'x' is not a card index"]),
        (["CXPU_VISIBLE_DEVICES=3-1"], ["range '3-1' must be low-high"]),
        (["CXPU_VISIBLE_DEVICES=0-99999"], ["range"]),
    ], ids=["unknown-index", "bad-token", "reversed-range", "huge-range"])
    def test_bad_selection(self, case: Case, env: List[str], needles: List[str]) -> None:
        """Selection syntax errors and unknown cards name the variable, the value and the fix."""
        fails(case, state(bundle(case.base, env)), "CXPU_VISIBLE_DEVICES=", *needles)

    def test_device_in_no_spec(self, case: Case) -> None:
        """An annotation naming a device no spec defines."""
        b = bundle(case.base, [], {"cdi.k8s.io/plugin_x": "vendor.com/gpu=0"})
        fails(case, state(b), "unresolvable CDI device 'vendor.com/gpu=0'", "no spec defines kind 'vendor.com/gpu'")

    def test_bad_annotation(self, case: Case) -> None:
        """A cdi.k8s.io annotation that is not a qualified device name."""
        b = bundle(case.base, [], {"cdi.k8s.io/plugin_x": "gpu0"})
        fails(case, state(b), "not fully qualified")

    def test_device_only_in_a_broken_spec(self, own: Case) -> None:
        """The requested kind is only in a broken file: the error says which file was skipped and why."""
        (own.spec_dir / "vendor.com-gpu.json").write_text('{"cdiVersion": "0.5.0", "kind": "vendor.com/gpu", ')
        b = bundle(own.base, [], {"cdi.k8s.io/plugin_x": "vendor.com/gpu=0"})
        fails(own, state(b), "unresolvable CDI device", "skipped", "vendor.com-gpu.json")

    def test_prestart_needs_a_host_pid(self, case: Case) -> None:
        """State pid 1 (a createContainer registration) is refused before anything is touched."""
        fails(case, state(bundle(case.base, ["CXPU_VISIBLE_DEVICES=1"]), pid=1), "register `xpu-cdi-hook prestart`")


class TestNothingAsked:
    @pytest.mark.parametrize("env", [[], ["CXPU_VISIBLE_DEVICES=void"], ["CXPU_VISIBLE_DEVICES="],
                                     ["CXPU_VISIBLE_DEVICES=none"], ["OTHER=1,3"]])
    def test_exit_0_untouched(self, case: Case, env: List[str]) -> None:
        """No selection (or a none value): exit 0, silent, even with a bogus pid and no rootfs."""
        b = bundle(case.base, env)
        os.rmdir(b / "rootfs" / "dev")
        os.rmdir(b / "rootfs")
        r = case.run_hook(state(b, pid=999999))
        assert r.returncode == 0 and r.stderr == b"" and case.log_text() == ""

    def test_broken_index_disables_only_env_selection(self, own: Case) -> None:
        """A broken hook index beside a good spec: env selection of that kind finds nothing, exit 0."""
        indexes = list(own.spec_dir.glob("*.xpu-cdi"))
        assert indexes
        for p in indexes:
            p.write_text("{broken")
        r = own.run_hook(state(bundle(own.base, ["CXPU_VISIBLE_DEVICES=1"]), pid=999999))
        assert r.returncode == 0, r.stderr
