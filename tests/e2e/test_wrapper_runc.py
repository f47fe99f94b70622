"""End to end: xpu-container-runtime in front of real runc 1.1, on a fake
8-card Kunlunxin host.  The wrapper alone (no hook) must give the container
its cards: nodes, cgroup access (v1 and the v2 eBPF program), the driver
mount and LD_LIBRARY_PATH.

Specs are generated into a per-test dir passed through XPU_CDI_SPEC_DIRS.
The default spec carries an `update-ldcache` createContainer hook: one test
runs it with the installed xpu-cdi-hook, another points it at a recording
stub; the rest use the env form of LD_LIBRARY_PATH (--ld-library-path-env).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import pytest
from support.runtimes import CARDS, ENXIO, Bundle, require, run_runc, unique

from support import fakehost

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
BIN = Path(sys.executable).parent
WRAPPER = str(BIN / "xpu-container-runtime")
CHECK = ("ls -l /dev/; (echo x > /dev/xpu2) 2>&1; (echo x > /dev/xpuctrl) 2>&1; echo LD=$LD_LIBRARY_PATH; "
         "cat /usr/local/xpu/version; ls /usr/local/xpu/lib64; (touch /usr/local/xpu/new) 2>&1; env; true")


@pytest.fixture
def host(tmp_path: Path) -> Iterator[fakehost.FakeHost]:
    h = fakehost.kunlunxin(tmp_path / "host", cards=8)
    yield h
    fakehost.remove_tree(h.root)


def generate(host: fakehost.FakeHost, spec_dir: Path, *extra: str) -> None:
    r = subprocess.run([str(BIN / "xpu-cdi"), "generate", *host.cli_roots, "--spec-dir", str(spec_dir), *extra],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.fixture
def spec_dir(tmp_path: Path, host: fakehost.FakeHost, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A spec (env form of LD_LIBRARY_PATH) in a per-test dir the wrapper reads via XPU_CDI_SPEC_DIRS."""
    require("runc")
    d = tmp_path / "cdi"
    generate(host, d, "--ld-library-path-env")
    monkeypatch.setenv("XPU_CDI_SPEC_DIRS", str(d))
    return d


def assert_card2(out: str) -> None:
    assert re.search(r"c[rw-]{9} .* 240, +2 .*xpu2$", out, re.M), out
    assert re.search(r"c[rw-]{9} .* 240, +200 .*xpuctrl$", out, re.M), out
    assert not re.search(r" xpu[013-7]$", out, re.M), f"only card 2 was asked for:\n{out}"
    assert out.count(ENXIO) == 2, f"both nodes must be allowed by the cgroup (ENXIO, not EPERM):\n{out}"
    assert "LD=/usr/local/xpu/lib64\n" in out
    assert "version:5.0.21" in out and "libxpuml.so.1" in out
    assert "Read-only file system" in out
    assert "XPU_CDI_" not in out, "nothing of the wrapper's own environment reaches the container"


@pytest.mark.parametrize("env, cards", [
    (["CXPU_VISIBLE_DEVICES=4,5", "XPU_VISIBLE_DEVICES=0,1"], "xpu4 xpu5"),
    (["XPU_VISIBLE_DEVICES=0,1"], ""),
], ids=["vendor-selector-wins", "in-process-variable-selects-nothing"])
def test_only_the_vendor_selector_selects(tmp_path: Path, spec_dir: Path, env: List[str], cards: str) -> None:
    """XPU_VISIBLE_DEVICES is what Kunlunxin frameworks export inside a container to pick among the
    cards it already has: an image exporting it never gets host cards. CXPU_VISIBLE_DEVICES=4,5 with
    XPU_VISIBLE_DEVICES=0,1 gives exactly xpu4 and xpu5; XPU_VISIBLE_DEVICES alone gives no card."""
    b = Bundle(tmp_path)
    b.set_process(["sh", "-c", CARDS], env=env)
    r = run_runc(b, runtime=WRAPPER)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].strip() == cards, r.stdout
    assert r.stdout.count(ENXIO) == len(cards.split()), r.stdout


@pytest.mark.parametrize("cgroup_v2", [False, True], ids=["cgroup-v1", "cgroup-v2"])
def test_env_selection(tmp_path: Path, spec_dir: Path, cgroup_v2: bool) -> None:
    """CXPU_VISIBLE_DEVICES=2: /dev/xpu2 and /dev/xpuctrl usable, libraries mounted, LD_LIBRARY_PATH set."""
    b = Bundle(tmp_path)
    b.set_process(["sh", "-c", CHECK], env=["CXPU_VISIBLE_DEVICES=2"])
    r = run_runc(b, runtime=WRAPPER, cgroup_v2=cgroup_v2)
    assert r.returncode == 0, r.stderr
    assert_card2(r.stdout)


def test_plain_runc_gives_nothing(tmp_path: Path, spec_dir: Path) -> None:
    """The control: the same bundle under plain runc has no card (so the wrapper did it)."""
    b = Bundle(tmp_path)
    b.set_process(["sh", "-c", "ls /dev; echo LD=$LD_LIBRARY_PATH"], env=["CXPU_VISIBLE_DEVICES=2"])
    r = run_runc(b)
    assert r.returncode == 0, r.stderr
    assert "xpu2" not in r.stdout and "LD=\n" in r.stdout


def test_annotation_selects_card_1(tmp_path: Path, spec_dir: Path) -> None:
    """cdi.k8s.io/test_x: kunlunxin.com/xpu=1 on the container gives card 1 only."""
    b = Bundle(tmp_path)
    b.config["annotations"]["cdi.k8s.io/test_x"] = "kunlunxin.com/xpu=1"
    b.set_process(["sh", "-c", "ls -l /dev; (echo x > /dev/xpu1) 2>&1; true"])
    r = run_runc(b, runtime=WRAPPER)
    assert r.returncode == 0, r.stderr
    assert re.search(r" 240, +1 .*xpu1$", r.stdout, re.M) and ENXIO in r.stdout, r.stdout
    assert not re.search(r" xpu[02-7]$", r.stdout, re.M), r.stdout


def test_image_library_path_is_kept_and_hooks_run(tmp_path: Path, host: fakehost.FakeHost,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Default spec (ldcache hook, no env form): the hook runs at createContainer and LD_LIBRARY_PATH
    gets the driver dir after the image's own value."""
    require("runc")
    marker = tmp_path / "hook-ran"
    stub = tmp_path / "stub-hook"
    stub.write_text(f"#!/bin/sh\necho \"$@\" > {marker}\n")
    stub.chmod(0o755)
    d = tmp_path / "cdi"
    generate(host, d, "--hook-path", str(stub))
    monkeypatch.setenv("XPU_CDI_SPEC_DIRS", str(d))
    b = Bundle(tmp_path)
    b.set_process(["sh", "-c", "echo LD=$LD_LIBRARY_PATH"], env=["CXPU_VISIBLE_DEVICES=0", "LD_LIBRARY_PATH=/app/lib"])
    r = run_runc(b, runtime=WRAPPER)
    assert r.returncode == 0, r.stderr
    assert "LD=/app/lib:/usr/local/xpu/lib64\n" in r.stdout
    assert marker.read_text().split() == ["update-ldcache", "--folder", "/usr/local/xpu/lib64"]


def test_default_spec_runs_the_real_ldcache_hook(tmp_path: Path, host: fakehost.FakeHost,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Default spec with the installed xpu-cdi-hook: runc runs its update-ldcache hook from the edited
    config.json (ld.so.conf.d entry, the image's ldconfig), and LD_LIBRARY_PATH is set as well."""
    require("runc")
    d = tmp_path / "cdi"
    generate(host, d)
    monkeypatch.setenv("XPU_CDI_SPEC_DIRS", str(d))
    b = Bundle(tmp_path)
    (b.rootfs / "etc" / "ld.so.conf.d").mkdir(parents=True)
    ldconfig = b.rootfs / "sbin" / "ldconfig"
    ldconfig.write_text('#!/bin/sh\necho "ldconfig ran $*" > /tmp/ldconfig-ran\n')
    ldconfig.chmod(0o755)
    b.set_process(["sh", "-c", "cat /etc/ld.so.conf.d/*.conf /tmp/ldconfig-ran; echo LD=$LD_LIBRARY_PATH"],
                  env=["CXPU_VISIBLE_DEVICES=2"])
    r = run_runc(b, runtime=WRAPPER)
    assert r.returncode == 0, r.stderr
    assert "\n/usr/local/xpu/lib64\n" in r.stdout and "ldconfig ran" in r.stdout, r.stdout
    assert "LD=/usr/local/xpu/lib64\n" in r.stdout


class TestRefused:
    """Bad requests: `create` fails with one line naming the device and the spec dirs; no container."""

    def create(self, tmp_path: Path, env: List[str], annotations: dict) -> subprocess.CompletedProcess:
        b = Bundle(tmp_path)
        b.set_process(["true"], env=env)
        b.config["annotations"].update(annotations)
        b.write()
        before = (b.dir / "config.json").read_bytes()
        cid = unique("xr")
        try:
            r = subprocess.run([WRAPPER, "create", "--bundle", str(b.dir), cid], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
            state = subprocess.run(["runc", "state", cid], capture_output=True, text=True)
            assert state.returncode != 0 and "does not exist" in state.stderr, "no container may be created"
            assert (b.dir / "config.json").read_bytes() == before
        finally:
            subprocess.run(["runc", "delete", "--force", cid], capture_output=True)
        assert r.returncode == 1
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("xpu-container-runtime: "), r.stderr
        return r

    def test_unknown_card(self, tmp_path: Path, spec_dir: Path) -> None:
        """CXPU_VISIBLE_DEVICES=9 on an 8-card host."""
        r = self.create(tmp_path, ["CXPU_VISIBLE_DEVICES=9"], {})
        assert "no card 9" in r.stderr and str(spec_dir) in r.stderr

    def test_unknown_annotated_device(self, tmp_path: Path, spec_dir: Path) -> None:
        """An annotation naming a device no spec defines."""
        r = self.create(tmp_path, [], {"cdi.k8s.io/test_x": "kunlunxin.com/xpu=12"})
        assert "'kunlunxin.com/xpu=12'" in r.stderr and str(spec_dir) in r.stderr

    def test_malformed_annotation(self, tmp_path: Path, spec_dir: Path) -> None:
        """An annotation value that is not a qualified CDI name."""
        r = self.create(tmp_path, [], {"cdi.k8s.io/test_x": "xpu1"})
        assert "'xpu1'" in r.stderr and str(spec_dir) in r.stderr

    def test_missing_spec(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Kunlunxin cards requested on a node whose spec dirs hold only an Ascend spec: the variable is
        known from the profiles (generate writes them into every index), its kind served by no spec."""
        require("runc")
        empty = tmp_path / "no-specs"
        npu = fakehost.ascend(tmp_path / "npu-host", cards=2)
        try:
            generate(npu, empty)
        finally:
            fakehost.remove_tree(npu.root)
        monkeypatch.setenv("XPU_CDI_SPEC_DIRS", str(empty))
        r = self.create(tmp_path, ["CXPU_VISIBLE_DEVICES=2"], {})
        assert "CXPU_VISIBLE_DEVICES='2'" in r.stderr and "kunlunxin.com/xpu" in r.stderr and str(empty) in r.stderr


def test_config_is_edited_once(tmp_path: Path, spec_dir: Path) -> None:
    """A create retried on the already edited bundle adds nothing twice."""
    b = Bundle(tmp_path)
    b.set_process(["true"], env=["CXPU_VISIBLE_DEVICES=1,3"])
    b.write()
    cid = unique("xi")
    try:
        for _ in range(2):
            # files, not pipes: a created container's init keeps its stdio open until `start`
            with open(tmp_path / "err", "w+") as err:
                r = subprocess.run([WRAPPER, "create", "--bundle", str(b.dir), cid], stdout=subprocess.DEVNULL,
                                   stderr=err, timeout=60, stdin=subprocess.DEVNULL)
                err.seek(0)
                stderr = err.read()
            cfg = json.loads((b.dir / "config.json").read_text())
            paths = [d["path"] for d in cfg["linux"]["devices"]]
            assert paths == ["/dev/xpuctrl", "/dev/xpu1", "/dev/xpu3"], paths
            assert len(cfg["linux"]["resources"]["devices"]) == 4
        assert r.returncode != 0 and "already exists" in stderr, "the second create reaches runc"
    finally:
        subprocess.run(["runc", "delete", "--force", cid], capture_output=True)
