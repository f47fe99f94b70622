"""packaging/image/build.py: its buildah calls, with a stand-in buildah on PATH that records its argv
and fails where asked (a failed build leaves no working container behind: the base's is removed, bud
removes a failed step's); and how it runs another architecture's programs (foreign(), emulate())."""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from support import imagebuild

STUB = """#!/bin/sh
printf '%s\\n' "$*" >> "{log}"
case " $* " in
  *" images "*) exit 0 ;;
  *" from "*) echo working-ctr; exit 0 ;;
  *" {fail} "*) echo "stand-in buildah: {fail} fails" >&2; exit 1 ;;
  *" push "*) for a; do case $a in oci-archive:*) p=${{a#oci-archive:}}; : > "${{p%%:*}}" ;; esac; done ;;
esac
exit 0
"""


def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: str, b: Any) -> Path:
    """The stand-in buildah on PATH, failing at *fail*, and module *b*'s base and context faked:
    the file its calls are recorded in."""
    bindir = tmp_path / "bin"
    bindir.mkdir(parents=True)
    log = tmp_path / "calls"
    (bindir / "buildah").write_text(STUB.format(log=log, fail=fail))
    (bindir / "buildah").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("XPU_CDI_IMAGE_STORAGE_DRIVER", "vfs")
    base = tmp_path / "work" / "base-bookworm-000000000000.tar"
    base.parent.mkdir()
    base.write_bytes(b"")
    monkeypatch.setattr(b, "make_base", lambda work, mirror, logf, target: base)
    monkeypatch.setattr(b, "make_context", lambda dest, repo: dest.mkdir(parents=True))
    return log


def run_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: str, target: str = "",
              error: str = "buildah failed", b: Any = None) -> List[str]:
    """build.build() (of module *b*, default a fresh one) for *target* with the stand-in failing at buildah
    *fail* (the build failing with *error*): the calls it made (after the storage args)."""
    b = b or imagebuild.builder()
    log = stand_in(tmp_path, monkeypatch, fail, b)
    with pytest.raises(RuntimeError, match=error):
        b.build(tmp_path / "out.tar", tmp_path / "work", target=target)
    return [ln.split(" vfs ", 1)[1] for ln in log.read_text().splitlines()]


def test_failed_base_commit_removes_its_working_container(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = run_build(tmp_path, monkeypatch, "add")
    assert calls[-1] == "rm working-ctr", calls
    assert not [c for c in calls if c.startswith("bud")]


def test_failed_bud_removes_its_working_containers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = run_build(tmp_path, monkeypatch, "bud")
    (bud,) = [c for c in calls if c.startswith("bud ")]
    assert "--force-rm" in bud.split()
    assert "rm working-ctr" in calls  # the base's, committed before bud ran


def test_bud_keeps_the_open_files_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian 13's buildah raises RLIMIT_NOFILE and RLIMIT_NPROC to 1048576 unless told, which
    fails without CAP_SYS_RESOURCE: the build passes the limits it has."""
    (bud,) = [c for c in run_build(tmp_path, monkeypatch, "bud") if c.startswith("bud ")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert f"--ulimit nofile={soft}:{hard}" in bud
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[0], 32768)
    assert f"--ulimit nproc={nproc}:{nproc}" in bud


def build_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str) -> Tuple[List[str], Dict[str, str]]:
    """build.build() for *target* with the stand-in buildah failing at bud, each base tarball named
    after its architecture: the architectures make_base() was asked for, and bud's ``--build-arg``s."""
    b = imagebuild.builder()
    monkeypatch.setattr(b, "foreign", lambda cmd, target: list(cmd))  # the stand-in buildah is a script
    log = stand_in(tmp_path, monkeypatch, "bud", b)
    made: List[str] = []

    def make_base(work: Path, mirror: str, logf: object, arch: str) -> Path:
        made.append(arch)
        tar = work / f"base-bookworm-{arch}.tar"
        tar.write_bytes(b"")
        return tar

    monkeypatch.setattr(b, "make_base", make_base)
    with pytest.raises(RuntimeError, match="buildah failed"):
        b.build(tmp_path / "out.tar", tmp_path / "work", target=target)
    (bud,) = [ln.split(" vfs ", 1)[1].split() for ln in log.read_text().splitlines() if " bud " in ln]
    assert bud[bud.index("--arch") + 1] == target, bud
    assert "--build-context" not in bud, bud
    args = dict(bud[i + 1].split("=", 1) for i, a in enumerate(bud) if a == "--build-arg")
    return made, args


def test_another_architecture_is_cross_compiled_on_this_machines_base(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """For arm64 the Containerfile's build stage runs on a base of the same release for this machine's
    architecture (its compilers are that release's, whatever the host runs) and cross-compiles there;
    the image's own stage is on the arm64 base.  Natively both stages take the one base."""
    native = imagebuild.builder().arch()
    made, args = build_args(tmp_path / "arm64", monkeypatch, "arm64")
    assert sorted(made) == sorted(["arm64", native]), made
    assert (args["BASE"], args["BUILD_BASE"]) == ("localhost/xpu-cdi-base:bookworm-arm64",
                                                 f"localhost/xpu-cdi-base:bookworm-{native}"), args
    assert (args["TARGETARCH"], args["TARGETPLATFORM"], args["BUILDPLATFORM"]) == (
        "arm64", "linux/arm64", f"linux/{native}"), args
    made, args = build_args(tmp_path / "native", monkeypatch, native)
    assert made == [native] and args["BASE"] == args["BUILD_BASE"], (made, args)
    assert args["TARGETPLATFORM"] == args["BUILDPLATFORM"] == f"linux/{native}", args


def test_the_build_stage_is_tagged_so_its_layers_outlive_a_prune(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """bud runs the build stage alone first and tags it (prune() drops untagged images only, and the
    toolchain's layers are the slow ones to make again), then the whole file with the same arguments."""
    b = imagebuild.builder()
    monkeypatch.setattr(b, "foreign", lambda cmd, target: list(cmd))  # the stand-in buildah is a script
    calls = run_build(tmp_path, monkeypatch, "push", target="arm64", b=b)
    stage, whole = [c.split() for c in calls if c.startswith("bud ")]
    assert stage[-5:-1] == ["--target", "build", "-t", "localhost/xpu-cdi-build:arm64"], stage
    assert whole[-3:-1] == ["-t", b.default_name()] and stage[:-5] == whole[:-3], (stage, whole)


def test_the_key_follows_what_goes_into_the_image(tmp_path: Path) -> None:
    """inputs_key() hashes the build context as .containerignore leaves it: an edit of a test, of CI or
    of a doc the package does not ship keeps the key (no new image); an edit of the sources, of a doc the
    package ships or of the Containerfile makes a new one; so does another architecture."""
    b = imagebuild.builder()
    repo = tmp_path / "repo"
    b.make_context(repo)  # no .git: the context's files are the tree's
    for rel in ("tests/test_x.py", ".ci/run.sh", "docs/fleet.md", "deploy/daemonset.yaml"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("first\n")
    key = b.inputs_key(repo, "amd64")
    assert b.inputs_key(repo, "arm64") != key
    for rel in ("tests/test_x.py", ".ci/run.sh", "docs/fleet.md", "deploy/daemonset.yaml"):
        (repo / rel).write_text("second\n")
        assert b.inputs_key(repo, "amd64") == key, rel
    for rel in ("src/xpu_cdi/cli.py", "docs/operations.md", "deploy/Containerfile", "packaging/deb/debian/rules"):
        before = (repo / rel).read_bytes()
        (repo / rel).write_bytes(before + b"\n")
        assert b.inputs_key(repo, "amd64") != key, rel
        (repo / rel).write_bytes(before)
    assert b.inputs_key(repo, "amd64") == key


def test_foreign_runs_an_arm64_program_and_leaves_the_system_as_it_was(tmp_path: Path) -> None:
    """An aarch64 program (Debian's cross compiler, static) run through foreign(): it runs and its exit
    status comes back; the system's binfmt_misc handlers are the same after as before (a handler of the
    build's own user namespace, when the system has none), and an unknown command fails in one line."""
    b = imagebuild.builder()
    src = tmp_path / "answer.c"
    src.write_text("int main(void) { return 42; }\n")
    prog = tmp_path / "answer"
    subprocess.run(["aarch64-linux-gnu-gcc", "-static", "-o", str(prog), str(src)], check=True)
    handlers = Path("/proc/sys/fs/binfmt_misc")
    before = sorted(p.name for p in handlers.iterdir())
    assert subprocess.run(b.foreign([str(prog)], "arm64"), timeout=120).returncode == 42
    assert sorted(p.name for p in handlers.iterdir()) == before
    if not b.system_runs("arm64"):
        r = subprocess.run(b.foreign(["/nonexistent"], "arm64"), capture_output=True, text=True, timeout=120)
        assert r.returncode == 125 and r.stderr.startswith("image: /nonexistent: "), r.stderr


def test_a_refused_prune_does_not_fail_a_written_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The layers prune after the push is housekeeping: buildah refusing it (a layer another build's
    working container still uses, as a concurrent or killed build leaves) keeps the written archive."""
    b = imagebuild.builder()
    log = stand_in(tmp_path, monkeypatch, "rmi", b)
    monkeypatch.setattr(b, "STORAGE_MAX_MIB", -1)  # the storage is always over: the prune runs
    b.build(tmp_path / "out.tar", tmp_path / "work")
    assert (tmp_path / "out.tar").is_file()
    assert any(ln.endswith(" rmi --prune") for ln in log.read_text().splitlines())


ENGINE_STUB = """#!/bin/sh
# a stand-in podman or docker: its arguments recorded, `save -o FILE` writes FILE
printf '%s\\n' "$*" >> "{log}"
if [ "$1" = save ]; then
  while [ $# -gt 0 ]; do [ "$1" = -o ] && : > "$2"; shift; done
fi
exit 0
"""


@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_podman_or_docker_alone_builds_and_saves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 engine: str) -> None:
    """`make image IMAGE_BUILDER=podman|docker`: the Containerfile built on the checkout's context (docker
    reads no .containerignore, so it is the copied one) with the pinned base unless told, no buildah or
    debootstrap called, then saved where make image writes its archive (podman: an OCI archive)."""
    b = imagebuild.builder()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls"
    (bindir / engine).write_text(ENGINE_STUB.format(log=log))
    (bindir / engine).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    copied: List[Path] = []
    monkeypatch.setattr(b, "make_context", lambda dest, repo: (copied.append(dest), dest.mkdir(parents=True)))
    out = tmp_path / "out" / "xpu-cdi.tar"
    b.engine_build(engine, out, tmp_path / "work", engine_args=["--network=host"])
    build, save = [ln.split() for ln in log.read_text().splitlines()]
    ctx = copied[0]
    assert build == ["build", "-f", str(ctx / "deploy" / "Containerfile"), "-t", b.default_name(),
                     "--build-arg", f"VERSION={b.version()}", "--network=host", str(ctx)], build
    fmt = ["--format", "oci-archive"] if engine == "podman" else []
    assert save == ["save", *fmt, "-o", f"{out}.tmp", b.default_name()], save
    assert out.is_file() and not ctx.exists()
    log.unlink()
    b.engine_build(engine, out, tmp_path / "work", base="localhost/debian:12", target="arm64"
                   if b.arch() != "arm64" else "amd64")
    build = log.read_text().splitlines()[0].split()
    assert "BASE=localhost/debian:12" in build and "--platform" in build, build


def test_the_containerfiles_base_is_pinned() -> None:
    """A digest, not a tag alone: the same base bytes for every build until the pin is moved."""
    text = (imagebuild.REPO / "deploy" / "Containerfile").read_text()
    (base,) = re.findall(r"^ARG BASE=(\S+)$", text, re.M)
    assert re.fullmatch(r"docker\.io/library/debian:bookworm-\d{8}-slim@sha256:[0-9a-f]{64}", base), base


def test_arch_without_dpkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a distribution without dpkg the architecture is the kernel's, in Debian's name."""
    import platform

    monkeypatch.setenv("PATH", str(tmp_path))  # no dpkg
    b = imagebuild.builder()
    assert b.arch() == {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


@pytest.mark.parametrize("tools, builder", [(["apt-get", "podman"], "buildah"), (["podman", "docker"], "podman"),
                                           (["docker"], "docker")])
def test_make_image_picks_the_builder_the_host_has(tmp_path: Path, tools: List[str], builder: str) -> None:
    """`make image` (dry run): buildah on a Debian-family host (apt-get), else podman, else docker; only
    buildah's way installs Debian packages."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("sh", "sed", "uname"):
        (bindir / tool).symlink_to(shutil.which(tool))  # type: ignore[arg-type]
    for tool in tools:
        (bindir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bindir / tool).chmod(0o755)
    r = subprocess.run([shutil.which("make") or "make", "-n", "-s", "image"], cwd=imagebuild.REPO,
                       env={"PATH": str(bindir)}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"--builder {builder}" in r.stdout, r.stdout
    assert ("install-deps.sh buildah debootstrap" in r.stdout) == (builder == "buildah"), r.stdout
