"""The upstream references (tests/support/upstream.py): pinned and checked by go.sum, a skip
naming what to install where Go is missing, and no such skip under CI=true."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import upstream

REPO = Path(__file__).resolve().parent.parent


def required_modules() -> list:
    text = (upstream.GOMOD / "go.mod").read_text()
    block = re.search(r"^require \((.*?)^\)", text, re.S | re.M)
    assert block, "go.mod has no require block"
    return [tuple(line.split()[:2]) for line in block.group(1).splitlines() if line.strip()]


def test_go_sum_pins_every_required_module() -> None:
    modules = required_modules()
    assert {m for m, _ in modules} >= {"k8s.io/kubelet", "k8s.io/cri-api", "tags.cncf.io/container-device-interface"}
    for module, version in modules:
        assert upstream.pinned(module, version), f"{module} {version} is not in go.sum"


def test_an_unpinned_version_is_refused_before_any_download() -> None:
    with pytest.raises(AssertionError, match="not pinned"):
        upstream.module_dir("k8s.io/kubelet", "v0.30.3")


def test_a_module_that_does_not_match_go_sum_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed checksum is an error, never a skip (the bits are not what was reviewed)."""
    upstream.module_dir("k8s.io/kubelet")  # in the module cache: go checks go.sum against it
    gomod = tmp_path / "gomod"
    shutil.copytree(upstream.GOMOD, gomod)
    sums = (gomod / "go.sum").read_text()
    good = re.search(r"^k8s\.io/kubelet v\S+ h1:(\S+)$", sums, re.M)
    assert good
    (gomod / "go.sum").write_text(sums.replace(good.group(1), "A" * 43 + "="))
    monkeypatch.setattr(upstream, "GOMOD", gomod)
    monkeypatch.setattr(upstream, "_DIRS", {})
    with pytest.raises(AssertionError, match="does not match go.sum"):
        upstream.module_dir("k8s.io/kubelet")


def test_without_go_the_skip_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(upstream, "GO_PLACES", (str(tmp_path / "go"),))
    with pytest.raises(pytest.skip.Exception, match=r"upstream reference unavailable: .*apt install golang-go"):
        upstream.go()


INNER = """
from support import upstream

def test_needs_a_reference():
    upstream.unavailable("simulated")
"""


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_missing_reference_fails_under_ci(tmp_path: Path, ci: str) -> None:
    """The report hook: the same skip is a skip outside CI and a failure under CI=true."""
    (tmp_path / "test_inner.py").write_text(INNER)
    env = dict(os.environ, CI=ci, PYTHONPATH=str(REPO / "tests"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "-p", "support.upstream", "--rootdir", str(tmp_path), "-c", "/dev/null",
                        str(tmp_path / "test_inner.py")], env=env, cwd=tmp_path, capture_output=True, text=True)
    if ci:
        assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout
        assert "CI=true, so this fails instead of skipping: upstream reference unavailable: simulated" in r.stdout
    else:
        assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout
        assert "upstream reference unavailable: simulated" in r.stdout


def test_the_project_never_reads_the_shared_reference() -> None:
    """The references come from the module proxy: nothing tracked names ../shared."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout (an sdist): nothing to list")
    hits = []
    for name in tracked.stdout.splitlines():
        path = REPO / name
        if name == "tests/test_upstream.py" or not path.is_file():
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):  # binaries, data
            continue
        if re.search(r"\.\./shared|shared/reference|/work/shared", text):
            hits.append(name)
    assert hits == [], hits
