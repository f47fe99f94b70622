"""The upstream references (tests/support/upstream.py): pinned and checked by go.sum, a skip
naming what to install where Go is missing, and no such skip under CI=true; the go command the
suite runs (go_for): the machine's when new enough, else the pinned golang.org/toolchain,
fetched by an old Go (Debian's own golang-go), checked against go.sum, and runnable."""

from __future__ import annotations

import fcntl
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
    with pytest.raises(AssertionError, match=r"does not match .*/gomod/go\.sum"):
        upstream.module_dir("k8s.io/kubelet")


def test_without_go_the_skip_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(upstream, "GO_PLACES", (str(tmp_path / "go"),))
    with pytest.raises(pytest.skip.Exception, match=r"upstream reference unavailable: .*apt install golang-go"):
        upstream.go()


INNER = """
import pytest
from support import upstream

def test_needs_a_reference():
    upstream.unavailable("simulated")

def test_needs_a_tool():
    pytest.skip("some-tool is not installed")

def test_needs_another_release():
    from support import cisafe
    cisafe.not_here("simulated release")
"""


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_missing_reference_fails_under_ci(tmp_path: Path, ci: str) -> None:
    """support/cisafe.py: the same skips are skips outside CI and failures under CI=true."""
    (tmp_path / "test_inner.py").write_text(INNER)
    env = dict(os.environ, CI=ci, PYTHONPATH=str(REPO / "tests"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "-p", "support.upstream", "-p", "support.cisafe", "--rootdir", str(tmp_path), "-c", "/dev/null",
                        str(tmp_path / "test_inner.py")], env=env, cwd=tmp_path, capture_output=True, text=True)
    if ci:
        assert r.returncode == 1 and "2 failed" in r.stdout, r.stdout
        assert "CI=true, so this fails instead of skipping: upstream reference unavailable: simulated" in r.stdout
        assert "CI=true, so this fails instead of skipping: some-tool is not installed" in r.stdout
        assert "1 skipped" in r.stdout and "simulated release" in r.stdout, r.stdout  # cisafe.not_here
    else:
        assert r.returncode == 0 and "3 skipped" in r.stdout, r.stdout
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


# ------------------------------------------------------------------ the go command (go_for, toolchain)


def debian_go() -> str:
    """Debian's own go command of this host's release (its golang-go: 1.19 on Debian 12, 1.24 on 13),
    unpacked from the package into the test cache once per machine (apt-get download, dpkg-deb -x)."""
    deps = subprocess.run(["apt-cache", "depends", "golang-go"], capture_output=True, text=True)
    m = re.search(r"Depends: (golang-1\.\d+-go)\b", deps.stdout)
    assert m, f"apt-cache depends golang-go names no golang-1.N-go: {deps.stdout}{deps.stderr}"
    dest = upstream.CACHE / "debian-go" / m.group(1)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / ".unpacked").is_file():
            shutil.rmtree(dest, ignore_errors=True)
            debs = dest.with_name(dest.name + ".debs")
            shutil.rmtree(debs, ignore_errors=True)
            debs.mkdir()
            subprocess.run(["apt-get", "download", "-qq", m.group(1)], cwd=debs, check=True, capture_output=True)
            for deb in debs.glob("*.deb"):
                subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
            shutil.rmtree(debs)
            (dest / ".unpacked").write_text(m.group(1) + "\n")
    found = sorted(dest.glob("usr/lib/go-*/bin/go"))
    assert found, f"{m.group(1)} holds no usr/lib/go-*/bin/go"
    return str(found[0])


@pytest.fixture
def only_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Make the given go command the machine's only one (PATH, GO_PLACES), with go_for's memory cleared."""
    def use(go_cmd: str) -> None:
        monkeypatch.setenv("PATH", str(Path(go_cmd).parent))  # no /usr/bin: Debian's golang-go may be there
        monkeypatch.setattr(upstream, "GO_PLACES", ())
        monkeypatch.setattr(upstream, "_DIRS", {})
        monkeypatch.setattr(upstream, "_VERSIONS", {})
    return use


def test_the_toolchain_is_pinned_for_both_architectures() -> None:
    sums = (upstream.TOOLCHAIN_MOD / "go.sum").read_text().splitlines()
    versions = {line.split()[1] for line in sums}
    release = upstream.toolchain_version().rsplit(".linux-", 1)[0]
    for arch in ("amd64", "arm64"):
        assert {f"{release}.linux-{arch}", f"{release}.linux-{arch}/go.mod"} <= versions, sums
    assert upstream.go_line(upstream.TOOLCHAIN_MOD / "go.mod") <= upstream.go_version(debian_go()), \
        "gotoolchain/go.mod asks for a Go newer than Debian's, which fetches the toolchain"


def test_a_new_enough_machine_go_is_the_one_used(only_go) -> None:
    machine = upstream.go_binary()
    assert machine, "no go on this machine: `make deps` installs golang-go"
    only_go(machine)
    assert upstream.go_for(upstream.go_version(machine)) == machine


def test_an_old_go_fetches_the_pinned_toolchain_which_builds(only_go, tmp_path: Path) -> None:
    """Debian's golang-go (older than the pins) fetches golang.org/toolchain; what it unpacks runs
    and builds: exec bits back on its commands, its _go.mod files back as go.mod."""
    old = debian_go()
    only_go(old)
    have = upstream.go_version(old)
    need = (have[0], have[1] + 1)
    chosen = upstream.go_for(need)
    version = upstream.toolchain_version()
    root = upstream.GOMODCACHE / f"{upstream.TOOLCHAIN}@{version}"
    assert chosen == str(root / "bin" / "go")
    assert upstream.go_version(chosen) == upstream.parse_go(version.split("-", 1)[1]) >= need
    for tool in [root / "bin" / "gofmt", *(p for p in (root / "pkg" / "tool").rglob("*") if p.is_file())]:
        assert os.access(tool, os.X_OK), f"{tool} is not executable"
    for underscored in root.rglob("_go.mod"):
        assert underscored.with_name("go.mod").read_bytes() == underscored.read_bytes()
    (tmp_path / "go.mod").write_text("module hello\n\ngo 1.26\n")
    (tmp_path / "main.go").write_text('package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello from go") }\n')
    env = dict(upstream.go_env(), CGO_ENABLED="0")
    subprocess.run([chosen, "build", "-o", str(tmp_path / "hello"), "."], cwd=tmp_path, env=env, check=True,
                   timeout=900)
    assert subprocess.run([str(tmp_path / "hello")], capture_output=True, text=True).stdout == "hello from go\n"


def test_make_runnable_restores_modes_and_go_mod_files_once(tmp_path: Path) -> None:
    """On a tree laid out as the toolchain's zip unpacks (read-only files, _go.mod): the commands
    get exec bits, other files none; each _go.mod is copied to go.mod; src/go.mod marks it done."""
    files = {"bin/go": "", "bin/gofmt": "", "pkg/tool/linux_amd64/compile": "", "lib/wasm/go_js_wasm_exec": "",
             "lib/wasm/wasm_exec.js": "", "src/fmt/print.go": "", "src/_go.mod": "module std\n",
             "src/cmd/_go.mod": "module cmd\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o444)
    upstream.make_runnable(tmp_path)
    runnable = {n for n in files if os.access(tmp_path / n, os.X_OK)}
    assert runnable == {"bin/go", "bin/gofmt", "pkg/tool/linux_amd64/compile", "lib/wasm/go_js_wasm_exec"}
    assert (tmp_path / "src/go.mod").read_text() == "module std\n"
    assert (tmp_path / "src/cmd/go.mod").read_text() == "module cmd\n"
    assert sorted(p.name for p in (tmp_path / "src").iterdir()) == ["_go.mod", "cmd", "fmt", "go.mod"]
    (tmp_path / "bin/go").chmod(0o444)  # done once: src/go.mod says so, nothing is redone
    upstream.make_runnable(tmp_path)
    assert not os.access(tmp_path / "bin/go", os.X_OK)
    (tmp_path / "src/go.mod").unlink()  # an interrupted fix-up is done again
    upstream.make_runnable(tmp_path)
    assert os.access(tmp_path / "bin/go", os.X_OK) and (tmp_path / "src/go.mod").is_file()


def test_a_toolchain_that_does_not_match_go_sum_fails(only_go, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    only_go(debian_go())
    upstream.toolchain()  # in the module cache: go checks go.sum against it
    pins = tmp_path / "gotoolchain"
    shutil.copytree(upstream.TOOLCHAIN_MOD, pins)
    sums = (pins / "go.sum").read_text()
    good = re.search(rf"^{re.escape(upstream.TOOLCHAIN)} {re.escape(upstream.toolchain_version())} h1:(\S+)$",
                     sums, re.M)
    assert good
    (pins / "go.sum").write_text(sums.replace(good.group(1), "A" * 43 + "="))
    monkeypatch.setattr(upstream, "TOOLCHAIN_MOD", pins)
    monkeypatch.setattr(upstream, "_DIRS", {})
    with pytest.raises(AssertionError, match=r"the module does not match .*/gotoolchain/go\.sum "
                                             r"\(verifying .*checksum mismatch\)"):
        upstream.go_for((9, 0))


def test_without_any_go_the_message_names_the_package(only_go, tmp_path: Path) -> None:
    only_go(str(tmp_path / "go"))
    with pytest.raises(upstream.GoUnavailable, match=r"no Go toolchain to fetch golang\.org/toolchain@.* "
                                                     r"\(apt install golang-go\)"):
        upstream.go_for((1, 0))
