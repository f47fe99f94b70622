"""Moving a pin (tests/support/k8s/builds.py `pin`): the component's go.mod gets the pinned
release's own dependency versions, not those of the release it moved from; a version the proxy
does not have says so, with the proxy's reason.  Pinned into a copy of the component's module
directory: nothing is built."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from support import upstream
from support.k8s import builds

REPO = Path(__file__).resolve().parent.parent


def requires(gomod: Path) -> Dict[str, str]:
    return dict(line.split()[:2] for line in builds.requirements(gomod.read_text()))


def older_release(module: str, current: str) -> str:
    """The newest release of *module* on the proxy of the minor before *current*'s."""
    go = upstream.go_for(upstream.go_line(builds.COMPONENTS["etcd"].dir / "go.mod"))
    r = subprocess.run([go, "list", "-m", "-versions", module], cwd=builds.COMPONENTS["etcd"].dir,
                       env=upstream.go_env(), capture_output=True, text=True, check=True, timeout=300)
    major, minor = upstream.parse_go(current)[:2]
    older = [v for v in r.stdout.split()[1:] if re.fullmatch(rf"v{major}\.{minor - 1}\.\d+", v)]
    assert older, f"no {module} v{major}.{minor - 1}.x on the proxy: {r.stdout}"
    return max(older, key=upstream.parse_go)


def test_pinning_an_older_release_takes_that_releases_dependencies(tmp_path: Path) -> None:
    component = builds.COMPONENTS["etcd"]
    where = tmp_path / "etcd"
    shutil.copytree(component.dir, where)
    version = older_release(component.module, component.version())
    builds.pin("etcd", version, where)
    pinned = requires(where / "go.mod")
    assert pinned[component.module] == version
    release = upstream.download_info(upstream.go_for(upstream.go_line(where / "go.mod")), where,
                                     f"{component.module}@{version}")
    own = requires(Path(release["GoMod"]))
    newer = {m: (v, own[m]) for m, v in pinned.items() if m in own and v != own[m]}
    assert newer == {}, f"versions other than {component.module} {version}'s own go.mod: {newer}"
    before = requires(component.dir / "go.mod")
    assert any(before.get(m) not in (None, v) for m, v in own.items()), \
        "the release pinned has the same dependencies as the current pin: it shows nothing"
    assert (where / "go.sum").read_text() != (component.dir / "go.sum").read_text()
    assert (component.dir / "go.mod").read_text() != (where / "go.mod").read_text()


def test_pinning_the_current_release_again_changes_no_requirement(tmp_path: Path) -> None:
    """A pin is reproducible: the committed go.mod/go.sum are what `pin` makes of their release."""
    component = builds.COMPONENTS["etcd"]
    where = tmp_path / "etcd"
    shutil.copytree(component.dir, where)
    builds.pin("etcd", component.version(), where)
    assert requires(where / "go.mod") == requires(component.dir / "go.mod")
    assert (where / "go.sum").read_text() == (component.dir / "go.sum").read_text()


def test_a_version_the_proxy_does_not_have_says_why(tmp_path: Path) -> None:
    component = builds.COMPONENTS["etcd"]
    where = tmp_path / "etcd"
    shutil.copytree(component.dir, where)
    gomod = (where / "go.mod").read_text()
    with pytest.raises(builds.Unavailable, match=rf"go mod download {re.escape(component.module)}@v3\.99\.0 "
                                                 r"failed: .*(not found|not available|Forbidden|unknown revision)"):
        builds.pin("etcd", "v3.99.0", where)
    assert (where / "go.mod").read_text() == gomod, "a failed pin rewrote go.mod"


def test_the_pin_command_prints_the_reason_on_one_line(tmp_path: Path) -> None:
    """The command, run from a copy of tests/support (a pin that did succeed would rewrite the copy)."""
    shutil.copytree(REPO / "tests" / "support", tmp_path / "support", ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([sys.executable, "-m", "support.k8s.builds", "pin", "etcd", "v3.99.0"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("pin: go mod download go.etcd.io/etcd/server/v3@v3.99.0 failed: ")
    assert "This module version is not available" in lines[0], lines[0]


def test_kube_proxy_is_built_from_the_kubernetes_pin() -> None:
    """kube-proxy (the fleet's) is pinned at the kubernetes component's release, with the same
    staging replaces, and its module's go.sum resolves every package it needs; its own bin dir."""
    proxy, k8s = builds.COMPONENTS["kube-proxy"], builds.COMPONENTS["kubernetes"]
    assert proxy.version() == k8s.version()

    def replaces(c: builds.Component) -> List[str]:
        return re.findall(r"^\s*(k8s\.io/\S+ => .*)$", (c.dir / "go.mod").read_text(), re.M)

    assert len(replaces(k8s)) > 20 and replaces(proxy) == replaces(k8s)
    assert proxy.bin_dir() != k8s.bin_dir() and proxy.bin_dir().parent.name == f"kube-proxy-{k8s.version()}"
    go = builds.check_go(proxy)
    r = subprocess.run([go, "list", "-deps", "k8s.io/kubernetes/cmd/kube-proxy"], cwd=proxy.dir,
                       env=upstream.go_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "k8s.io/kubernetes/pkg/proxy/iptables" in r.stdout.split()
