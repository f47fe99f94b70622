#!/usr/bin/python3
"""Build the DaemonSet's image without a registry: ``make image``.

deploy/Containerfile is the one recipe.  Users with a registry build it on
``debian:12-slim``; here no registry is reachable, so its base is made the way
Debian's own container images are made: ``debootstrap --variant=minbase``
of the release, slimmed by the same kind of dpkg path excludes (no docs, man
pages or translations), apt pointed at the release, its updates and its
security archive, and upgraded.  buildah (the containers project's image
builder, from Debian) then builds the Containerfile on that base, with chroot
isolation (no runtime, no daemon) and a private storage under the work
directory, and writes an OCI archive that ``ctr images import`` and
``podman load`` take.

    python3 packaging/image/build.py [--out FILE] [--work DIR] [--name REF]

The build context is the checkout as git lists it (tracked and untracked,
not ignored: what packaging/deb/build.sh packages) without the tests, the
fuzzers and the other manifests (:data:`NOT_IN_CONTEXT`), so local
environments and build output never enter the image and a test edit never
makes a new one.  Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
RELEASE = "bookworm"
# what debian:12-slim's dpkg excludes too: documentation, man pages, translations
# (copyright files and locale.alias stay); applied to the base and every later install
SLIM_RULES = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
"""
SOURCES = """\
Types: deb
URIs: {mirror}
Suites: {release} {release}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: {security}
Suites: {release}-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
POLICY_RC_D = "#!/bin/sh\n# xpu-cdi image build: no service starts\nexit 101\n"


def version() -> str:
    text = (REPO / "packaging" / "deb" / "debian" / "changelog").read_text()
    return re.match(r"xpu-cdi \(([^)]+)\)", text).group(1)  # type: ignore[union-attr]


def arch() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()


def default_name() -> str:
    # what kubelet looks up for `image: xpu-cdi:<version>` (docker.io/library/ is the default)
    return f"docker.io/library/xpu-cdi:{version()}"


def log(msg: str) -> None:
    print(f"image: {msg}", file=sys.stderr, flush=True)


def host_mirror() -> str:
    """The Debian archive the host's apt uses (deb822 or one-line sources), default deb.debian.org."""
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        for m in re.finditer(r"^(?:URIs:\s*|deb\s+(?:\[[^]]*\]\s+)?)(\S+)", text, re.M):
            uri = m.group(1).rstrip("/")
            if uri.endswith("/debian"):
                return uri
    return "http://deb.debian.org/debian"


def run(cmd: Sequence[str], logf, **kw) -> None:  # type: ignore[no-untyped-def]
    logf.write(f"$ {' '.join(cmd)}\n".encode())
    logf.flush()
    r = subprocess.run(list(cmd), stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C"), **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed (exit {r.returncode}); the log is {logf.name}")


# ---------------------------------------------------------------- the build context


# what the image is not built from (so that editing a test or a manifest does not make a
# new image): the test suite, the fuzzers, CI, and deploy/ but for the Containerfile
NOT_IN_CONTEXT = re.compile(r"^(tests|fuzz|\.ci)/|^deploy/(?!Containerfile$)")


def context_files(repo: Path = REPO) -> List[str]:
    """The files of the build context, relative to *repo*, sorted."""
    if (repo / ".git").exists():
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
        files = [f for f in out.decode().split("\0") if f and (repo / f).is_file()]
    else:
        skip = re.compile(r"(^|/)(\.git|\.venv|build|dist|__pycache__|out|bin|[^/]*\.egg-info)(/|$)|\.(pyc|so|o)$")
        files = [str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()
                 and not skip.search(str(p.relative_to(repo)))]
    return sorted(f for f in files if not NOT_IN_CONTEXT.search(f))


def make_context(dest: Path, repo: Path = REPO) -> None:
    for rel in context_files(repo):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / rel, target)


def inputs_key(repo: Path = REPO) -> str:
    """A hash of everything the image is built from: the context (names, modes, bytes), the
    release, the slimming rules and this script (which is part of the context)."""
    h = hashlib.sha256(f"{RELEASE}\n{SLIM_RULES}\n{arch()}\n".encode())
    for rel in context_files(repo):
        p = repo / rel
        h.update(f"{rel}\0{p.stat().st_mode & 0o111:o}\0".encode())
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- the base


def base_key(mirror: str) -> str:
    return hashlib.sha256(f"{RELEASE}\n{mirror}\n{SLIM_RULES}\n{SOURCES}\n{arch()}".encode()).hexdigest()[:12]


def slim(root: Path) -> None:
    """Apply SLIM_RULES to what debootstrap already installed (dpkg applies them to later installs)."""
    excludes = [r.split(None, 1)[1] for r in SLIM_RULES.splitlines() if r.startswith("path-exclude")]
    includes = [r.split(None, 1)[1] for r in SLIM_RULES.splitlines() if r.startswith("path-include")]
    import fnmatch

    for dirpath, dirnames, filenames in os.walk(root / "usr" / "share"):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            inside = "/" + os.path.relpath(full, root)
            if any(fnmatch.fnmatch(inside, e) for e in excludes) and not any(fnmatch.fnmatch(inside, i)
                                                                            for i in includes):
                os.unlink(full)
    for dirpath, dirnames, _ in os.walk(root / "usr" / "share", topdown=False):
        for d in dirnames:
            try:
                os.rmdir(os.path.join(dirpath, d))  # only the emptied ones
            except OSError:
                pass


def make_base(work: Path, mirror: str, logf) -> Path:  # type: ignore[no-untyped-def]
    """The base root as a tarball, ``<work>/base-<key>.tar`` (made when absent)."""
    tar = work / f"base-{RELEASE}-{base_key(mirror)}.tar"
    if tar.is_file():
        return tar
    root = work / f"base-{RELEASE}.building"
    if root.exists():
        subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)
    t0 = time.monotonic()
    run(["debootstrap", "--variant=minbase", RELEASE, str(root), mirror], logf)
    (root / "etc" / "dpkg" / "dpkg.cfg.d" / "xpu-cdi-slim").write_text(SLIM_RULES)
    slim(root)
    (root / "etc" / "apt" / "sources.list").unlink(missing_ok=True)
    security = mirror.rsplit("/", 1)[0] + "/debian-security"
    (root / "etc" / "apt" / "sources.list.d" / "debian.sources").write_text(
        SOURCES.format(mirror=mirror, security=security, release=RELEASE))
    policy = root / "usr" / "sbin" / "policy-rc.d"
    policy.write_text(POLICY_RC_D)
    policy.chmod(0o755)
    shutil.copy2("/etc/resolv.conf", root / "etc" / "resolv.conf")
    script = ('set -e; R=$1; mount -t proc proc "$R/proc"; chroot "$R" apt-get update -qq; '
              'chroot "$R" apt-get -y -qq upgrade; chroot "$R" apt-get clean')
    run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(root)], logf)
    # what a container runtime provides, or a build must not leave behind
    policy.unlink()
    for rel in ("etc/resolv.conf", "etc/hostname"):
        (root / rel).unlink(missing_ok=True)
    (root / "etc" / "machine-id").write_text("")
    for d in ("var/lib/apt/lists", "var/cache/apt", "var/log", "dev", "tmp", "run"):
        for p in (root / d).iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
    tmp = tar.with_suffix(".tar.tmp")
    run(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(tmp), "."], logf)
    os.rename(tmp, tar)
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)
    log(f"base {RELEASE} made in {time.monotonic() - t0:.0f} s")
    return tar


# ---------------------------------------------------------------- buildah


def storage_driver(work: Path) -> str:
    """overlay where the kernel allows it on the work dir (fast, shared layers), else vfs."""
    forced = os.environ.get("XPU_CDI_IMAGE_STORAGE_DRIVER")
    if forced:
        return forced
    probe = work / "overlay-probe"
    shutil.rmtree(probe, ignore_errors=True)
    for d in ("lower", "upper", "work", "merged"):
        (probe / d).mkdir(parents=True)
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={probe}/lower,upperdir={probe}/upper,workdir={probe}/work", str(probe / "merged")],
                       capture_output=True)
    shutil.rmtree(probe, ignore_errors=True)
    return "overlay" if r.returncode == 0 else "vfs"


class Buildah:
    def __init__(self, work: Path, logf) -> None:  # type: ignore[no-untyped-def]
        if shutil.which("buildah") is None:
            raise RuntimeError("buildah is missing: `make image` installs it (scripts/install-deps.sh buildah)")
        self.work, self.logf = work, logf
        self.driver = storage_driver(work)
        self.base_args = ["buildah", "--root", str(work / f"storage-{self.driver}"), "--runroot",
                          str(work / "runroot"), "--storage-driver", self.driver]

    def __call__(self, *args: str, capture: bool = False) -> str:
        cmd = [*self.base_args, *args]
        if not capture:
            run(cmd, self.logf)
            return ""
        r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {r.stderr.strip()}")
        return r.stdout.strip()


STORAGE_MAX_MIB = int(os.environ.get("XPU_CDI_IMAGE_STORAGE_MAX_MIB", "4096"))


def prune(b: "Buildah", work: Path) -> None:
    """Drop the layers of earlier builds once buildah's storage passes STORAGE_MAX_MIB (each source state
    adds its own; the next build then reruns the build stage's apt step once)."""
    r = subprocess.run(["du", "-sm", str(work / f"storage-{b.driver}")], capture_output=True, text=True)
    mib = int(r.stdout.split()[0]) if r.returncode == 0 and r.stdout else 0
    if mib > STORAGE_MAX_MIB:
        log(f"buildah storage at {mib} MiB: removing the layers of earlier builds")
        b("rmi", "--prune")


def build(out: Path, work: Path, name: Optional[str] = None, repo: Path = REPO) -> Dict[str, float]:
    """Build the image into the OCI archive *out*; returns the timings (s)."""
    name = name or default_name()
    work.mkdir(parents=True, exist_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    times: Dict[str, float] = {}
    with open(work / "build.log", "wb") as logf:
        t0 = time.monotonic()
        base_tar = make_base(work, host_mirror(), logf)
        times["base"] = time.monotonic() - t0
        b = Buildah(work, logf)
        base = f"localhost/xpu-cdi-base:{base_tar.stem.split('-', 1)[1]}"
        if not b("images", "--quiet", "--filter", f"reference={base}", capture=True):
            ctr = b("from", "--quiet", "scratch", capture=True)
            try:
                b("add", ctr, str(base_tar), "/")
                b("config", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                  "--cmd", "bash", ctr)
                b("commit", "--quiet", ctr, base)
            finally:
                b("rm", ctr)  # the working container, on failure too
        ctx = work / "context"
        shutil.rmtree(ctx, ignore_errors=True)
        make_context(ctx, repo)
        t1 = time.monotonic()
        # --force-rm: a failed step's working container goes too (buildah keeps it by default)
        b("bud", "--isolation", "chroot", "--layers", "--force-rm", "--pull-never", "--build-arg", f"BASE={base}",
          "--build-arg", f"VERSION={version()}", "--build-arg", f"TARGETARCH={arch()}",
          "-f", str(ctx / "deploy" / "Containerfile"), "-t", name, str(ctx))
        times["bud"] = time.monotonic() - t1
        tmp = out.with_name(out.name + ".tmp")
        tmp.unlink(missing_ok=True)
        b("push", "--quiet", name, f"oci-archive:{tmp}:{name}")
        os.rename(tmp, out)
        shutil.rmtree(ctx, ignore_errors=True)
        prune(b, work)
        times["total"] = time.monotonic() - t0
    return times


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "packaging" / "image" / "out" /
                        f"xpu-cdi_{version()}_{arch()}.oci.tar")
    parser.add_argument("--work", type=Path, default=REPO / "build" / "image",
                        help="base tarball, buildah's storage (layers cached between builds), the log")
    parser.add_argument("--name", default=None, help=f"image reference in the archive (default {default_name()})")
    args = parser.parse_args(argv)
    try:
        times = build(args.out, args.work, args.name)
    except RuntimeError as err:
        print(f"image: {err}", file=sys.stderr)
        return 1
    size = args.out.stat().st_size / (1 << 20)
    print(json.dumps({"archive": str(args.out), "mib": round(size, 1),
                      **{k: round(v, 1) for k, v in times.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
