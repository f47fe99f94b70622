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

    python3 packaging/image/build.py [--arch ARCH] [--out FILE] [--work DIR] [--name REF]

``--arch arm64`` on an amd64 machine (``make image ARCH=arm64``) builds the same recipe for
arm64.  The Containerfile's build stage runs on a base of the same release for the machine's own
architecture (``BUILD_BASE``, ``FROM --platform=$BUILDPLATFORM``) and cross-compiles there with
that release's cross toolchain, so the .deb and the static binaries are built against the image's
libc and Python whatever release the build host runs, and no compiler runs under emulation.  Only
what must run on arm64 runs under Debian's qemu-user-static through binfmt_misc: debootstrap's
second stage, the base's upgrade and the final stage's install of the .deb.  Where the system has
no such handler, the build registers one in a binfmt_misc of its own user namespace (Linux 6.7 and
later), so nothing changes on the machine (:func:`foreign`; docs/operations.md).

The build context is the checkout as git lists it (tracked and untracked, not ignored: what
packaging/deb/build.sh packages) less what .containerignore names (the tests, the fuzzers, CI,
the manifests, the docs the package does not ship), so local environments and build output never
enter the image, and the image's key (:func:`inputs_key`) changes with what goes into the image
only.  Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

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


# the kernel's machine names -> Debian's architecture names (what TARGETARCH and the .deb use)
MACHINES = {"x86_64": "amd64", "aarch64": "arm64"}


def arch() -> str:
    """The build machine's architecture (Debian's name): dpkg's, or the kernel's where there is no dpkg
    (openEuler, Kylin: `make image IMAGE_BUILDER=podman` needs no Debian tool)."""
    try:
        return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        import platform

        machine = platform.machine()
        return MACHINES.get(machine, machine)


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


def run(cmd: Sequence[str], logf, env: Optional[Dict[str, str]] = None, **kw) -> None:  # type: ignore[no-untyped-def]
    logf.write(f"$ {' '.join(cmd)}\n".encode())
    logf.flush()
    r = subprocess.run(list(cmd), stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C", **(env or {})}, **kw)
    if r.returncode != 0:
        name = cmd[cmd.index("--emulate") + 3] if "--emulate" in cmd else cmd[0]  # foreign()'s: the command inside
        raise RuntimeError(f"{name} failed (exit {r.returncode}); the log is {logf.name}")


# ---------------------------------------------------------------- the build context


# .containerignore's wildcards, escaped by re.escape, as regular expressions
GLOB = {r"\*\*/": "(?:.*/)?", r"\*\*": ".*", r"\*": "[^/]*", r"\?": "[^/]"}


def ignore_rules(repo: Path = REPO) -> List[Tuple[bool, "re.Pattern[str]"]]:
    """The patterns of *repo*'s .containerignore (the one list of what is not in the build context,
    which podman and buildah read too) as ``(negated, regex)``: relative to the context's root, ``*``
    within a name, ``**`` across directories, a match on a directory covering all under it."""
    rules = []
    try:
        lines = (repo / ".containerignore").read_text().splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        rx = re.sub(r"\\\*\\\*/|\\\*\\\*|\\\*|\\\?", lambda m: GLOB[m.group(0)], re.escape(pattern))
        rules.append((negated, re.compile(f"^{rx}(?:/.*)?$")))
    return rules


def ignored(rel: str, rules: Sequence[Tuple[bool, "re.Pattern[str]"]]) -> bool:
    """The last rule matching *rel* decides, as in podman's and Docker's .containerignore."""
    out = False
    for negated, rx in rules:
        if rx.match(rel):
            out = not negated
    return out


def context_files(repo: Path = REPO) -> List[str]:
    """The files of the build context, relative to *repo*, sorted: git's list (or the tree) less
    what .containerignore names."""
    if (repo / ".git").exists():
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
        files = [f for f in out.decode().split("\0") if f and (repo / f).is_file()]
    else:
        skip = re.compile(r"(^|/)(\.git|\.venv|build|dist|__pycache__|out|bin|[^/]*\.egg-info)(/|$)|\.(pyc|so|o)$")
        files = [str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()
                 and not skip.search(str(p.relative_to(repo)))]
    rules = ignore_rules(repo)
    return sorted(f for f in files if not ignored(f, rules))


def make_context(dest: Path, repo: Path = REPO) -> None:
    for rel in context_files(repo):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / rel, target)


def inputs_key(repo: Path = REPO, target: str = "") -> str:
    """A hash of everything the image is built from: the context (names, modes, bytes), the
    release, the slimming rules, the architecture and this script (which is part of the context)."""
    h = hashlib.sha256(f"{RELEASE}\n{SLIM_RULES}\n{target or arch()}\n".encode())
    for rel in context_files(repo):
        p = repo / rel
        h.update(f"{rel}\0{p.stat().st_mode & 0o111:o}\0".encode())
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


NPROC_CAP = 32768


def kept_ulimits() -> List[str]:
    """``--ulimit`` options no build step needs to raise: our own nofile limit, and an nproc limit
    of at most 32768 (buildah 1.28's chroot lowers it to that first; root's processes are not
    counted against it, so a lower value costs nothing)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[0], NPROC_CAP)
    return ["--ulimit", "nofile=%d:%d" % nofile, "--ulimit", f"nproc={nproc}:{nproc}"]


# ---------------------------------------------------------------- the base


def base_key(mirror: str, target: str) -> str:
    return hashlib.sha256(f"{RELEASE}\n{mirror}\n{SLIM_RULES}\n{SOURCES}\n{target}".encode()).hexdigest()[:12]


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


def make_base(work: Path, mirror: str, logf, target: str = "") -> Path:  # type: ignore[no-untyped-def]
    """The base root of architecture *target* as a tarball, ``<work>/base-<key>.tar`` (made when absent)."""
    target = target or arch()
    tar = work / f"base-{RELEASE}-{base_key(mirror, target)}.tar"
    if tar.is_file():
        return tar
    root = work / f"base-{RELEASE}.building"
    if root.exists():
        subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)
    t0 = time.monotonic()
    if target == arch():
        run(["debootstrap", "--variant=minbase", RELEASE, str(root), mirror], logf)
    else:
        # the first stage unpacks (no foreign code); the second configures, inside the root.
        # container=lxc: debootstrap skips its mknod probe, which a user namespace refuses
        # (the nodes it needs were made by the first stage)
        run(["debootstrap", "--foreign", f"--arch={target}", "--variant=minbase", RELEASE, str(root), mirror], logf)
        run(foreign(["env", "container=lxc", "chroot", str(root), "/debootstrap/debootstrap", "--second-stage"],
                    target), logf)
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
    # /proc bound, not mounted anew: a user namespace (foreign()) may bind it, not mount one
    script = ('set -e; R=$1; mount --rbind /proc "$R/proc"; chroot "$R" apt-get update -qq; '
              'chroot "$R" apt-get -y -qq upgrade; chroot "$R" apt-get clean')
    run(foreign(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(root)], target), logf)
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


# ---------------------------------------------------------------- another architecture's programs

QEMU_NAMES = {"arm64": "aarch64", "amd64": "x86_64"}
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000


def binfmt_rule(target: str) -> str:
    """The binfmt_misc rule Debian's qemu-user-static ships for *target*, with F (the interpreter
    opened at registration, so it runs inside a chroot that has no qemu)."""
    conf = Path(f"/usr/lib/binfmt.d/qemu-{QEMU_NAMES[target]}.conf")
    try:
        line = next(ln for ln in conf.read_text().splitlines() if ln.startswith(":"))
    except (OSError, StopIteration):
        raise RuntimeError(f"{conf} is missing: install qemu-user-static (make image ARCH={target} does)") from None
    fields = line.split(":")  # :name:type:offset:magic:mask:interpreter:flags
    if "F" not in fields[7]:
        fields[7] += "F"
    return ":".join(fields)


def system_runs(target: str) -> bool:
    """The system's binfmt_misc runs *target*'s programs already (binfmt-support or systemd-binfmt
    registered qemu with F)."""
    try:
        text = Path(f"/proc/sys/fs/binfmt_misc/qemu-{QEMU_NAMES[target]}").read_text()
    except OSError:
        return False
    return text.startswith("enabled") and re.search(r"^flags: \S*F", text, re.M) is not None


def foreign(cmd: Sequence[str], target: str) -> List[str]:
    """*cmd* as run where *target*'s programs run: as it is on such a machine or where the system
    registered qemu for them, else through :func:`emulate` (``build.py --emulate``)."""
    if target == arch() or system_runs(target):
        return list(cmd)
    binfmt_rule(target)  # missing qemu: say so before anything starts
    return [sys.executable, str(Path(__file__).resolve()), "--emulate", target, "--", *cmd]


def emulate(target: str, cmd: Sequence[str]) -> int:
    """Run *cmd* (as root) in a user namespace mapping every uid and gid to itself, with a mount
    namespace and a binfmt_misc instance of its own where qemu runs *target*'s programs: the
    kernel gives each user namespace that mounts binfmt_misc its own handlers (Linux 6.7), so
    the system's are neither needed nor touched.  The parent writes the id maps (a process
    cannot map ids beyond its own into its new namespace); the child waits for them."""
    rule = binfmt_rule(target)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(go_w)
        try:
            os._exit(_in_user_namespace(target, rule, cmd, ready_w, go_r))
        except BaseException as err:  # never back into the parent's code
            os.write(2, f"image: {cmd[0]}: {err}\n".encode())
            os._exit(125)
    os.close(ready_w)
    os.close(go_r)
    try:
        if os.read(ready_r, 1) == b"1":
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{pid}/{name}", "w") as f:
                    f.write("0 0 4294967295\n")
            os.write(go_w, b"1")
    finally:
        os.close(go_w)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _in_user_namespace(target: str, rule: str, cmd: Sequence[str], ready_w: int, go_r: int) -> int:
    """:func:`emulate`'s child: unshare, wait for the id maps, mount and register, exec *cmd*."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare of a user namespace refused")
    os.write(ready_w, b"1")
    if os.read(go_r, 1) != b"1":
        raise RuntimeError("the parent did not map the user namespace's ids")
    for step in (["mount", "--make-rprivate", "/"],
                 ["mount", "-t", "binfmt_misc", "binfmt_misc", "/proc/sys/fs/binfmt_misc"]):
        if subprocess.run(step).returncode != 0:
            raise RuntimeError(f"{' '.join(step)} failed in a user namespace: running {target} programs needs "
                               f"Linux 6.7 or later, or qemu registered for the system (apt install binfmt-support, "
                               f"then update-binfmts --enable qemu-{QEMU_NAMES[target]})")
    with open("/proc/sys/fs/binfmt_misc/register", "w") as f:
        f.write(rule)
    os.execvp(cmd[0], list(cmd))
    return 127  # not reached


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
    def __init__(self, work: Path, logf, target: str = "") -> None:  # type: ignore[no-untyped-def]
        if shutil.which("buildah") is None:
            raise RuntimeError("buildah is missing: `make image` installs it (scripts/install-deps.sh buildah)")
        self.work, self.logf, self.target = work, logf, target or arch()
        # vfs for another architecture: its RUN steps may run in a user namespace (foreign())
        self.driver = storage_driver(work) if self.target == arch() else "vfs"
        self.base_args = ["buildah", "--root", str(work / f"storage-{self.driver}"), "--runroot",
                          str(work / "runroot"), "--storage-driver", self.driver]

    def __call__(self, *args: str, capture: bool = False, runs_target: bool = False) -> str:
        """buildah *args*; *runs_target*: it runs the target's programs (bud's RUN steps)."""
        cmd = [*self.base_args, *args]
        if runs_target:
            cmd = foreign(cmd, self.target)
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
    adds its own).  What the last build's images stand on stays: its build stage is tagged for that."""
    r = subprocess.run(["du", "-sm", str(work / f"storage-{b.driver}")], capture_output=True, text=True)
    mib = int(r.stdout.split()[0]) if r.returncode == 0 and r.stdout else 0
    if mib > STORAGE_MAX_MIB:
        log(f"buildah storage at {mib} MiB: removing the layers of earlier builds")
        try:
            b("rmi", "--prune")
        except RuntimeError as err:  # the archive is written: layers another build still uses wait for the next prune
            log(f"kept some layers: {err}")


def base_image(b: "Buildah", tar: Path, target: str) -> str:
    """The base root *tar* of architecture *target* as an image in buildah's storage (committed when
    absent): its reference."""
    ref = f"localhost/xpu-cdi-base:{tar.stem.split('-', 1)[1]}"
    if not b("images", "--quiet", "--filter", f"reference={ref}", capture=True):
        ctr = b("from", "--quiet", "scratch", capture=True)
        try:
            b("add", ctr, str(tar), "/")
            b("config", "--arch", target, "--cmd", "bash",
              "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", ctr)
            b("commit", "--quiet", ctr, ref)
        finally:
            b("rm", ctr)  # the working container, on failure too
    return ref


def build(out: Path, work: Path, name: Optional[str] = None, repo: Path = REPO, target: str = "") -> Dict[str, float]:
    """Build the image for architecture *target* (default: the machine's) into the OCI archive *out*;
    returns the timings (s)."""
    name = name or default_name()
    target = target or arch()
    work.mkdir(parents=True, exist_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    times: Dict[str, float] = {}
    with open(work / "build.log", "wb") as logf:
        t0 = time.monotonic()
        base_tar = make_base(work, host_mirror(), logf, target)
        # the build stage's base: the same release for this machine (it cross-compiles for another)
        builder_tar = base_tar if target == arch() else make_base(work, host_mirror(), logf, arch())
        times["base"] = time.monotonic() - t0
        b = Buildah(work, logf, target)
        base = base_image(b, base_tar, target)
        builder = base_image(b, builder_tar, arch())
        ctx = work / "context"
        shutil.rmtree(ctx, ignore_errors=True)
        make_context(ctx, repo)
        t1 = time.monotonic()
        # --force-rm: a failed step's working container goes too (buildah keeps it by default);
        # --ulimit: the steps keep our open-files and process limits (newer buildah raises both
        # to 1048576, which a root without CAP_SYS_RESOURCE, as on some CI machines, may not)
        bud = ["bud", "--isolation", "chroot", "--layers", "--force-rm", *kept_ulimits(), "--pull-never",
               "--arch", target, "--build-arg", f"BASE={base}", "--build-arg", f"BUILD_BASE={builder}",
               "--build-arg", f"VERSION={version()}",
               # what newer buildah sets itself; 1.28 (Debian 12) resolves FROM --platform only with them given
               "--build-arg", f"TARGETARCH={target}", "--build-arg", f"TARGETPLATFORM=linux/{target}",
               "--build-arg", f"BUILDPLATFORM=linux/{arch()}", "-f", str(ctx / "deploy" / "Containerfile")]
        # the build stage first, tagged: its layers (the toolchain's install above all) then belong to
        # an image, so prune() keeps them and the next source change reruns only what follows COPY . /src
        b(*bud, "--target", "build", "-t", f"localhost/xpu-cdi-build:{target}", str(ctx))
        b(*bud, "-t", name, str(ctx), runs_target=True)
        times["bud"] = time.monotonic() - t1
        tmp = out.with_name(out.name + ".tmp")
        tmp.unlink(missing_ok=True)
        b("push", "--quiet", name, f"oci-archive:{tmp}:{name}")
        os.rename(tmp, out)
        shutil.rmtree(ctx, ignore_errors=True)
        prune(b, work)
        times["total"] = time.monotonic() - t0
    return times


# ---------------------------------------------------------------- podman or docker, any distribution

ENGINES = ("podman", "docker")


def engine_build(engine: str, out: Path, work: Path, name: Optional[str] = None, repo: Path = REPO,
                 target: str = "", base: Optional[str] = None, context: Optional[Path] = None,
                 engine_args: Sequence[str] = (), env: Optional[Dict[str, str]] = None) -> Dict[str, float]:
    """deploy/Containerfile built by *engine* (podman or docker) into the archive *out*: its pinned
    Debian base from the registry (or *base*), its build stage compiling the .deb and the static
    binaries, so the build host needs that engine alone.  The context is the one buildah gets (git's
    files less .containerignore, copied under *work*; docker reads no .containerignore) unless
    *context* names one; *engine_args* go to ``<engine> build``, *env* to every call (a private podman
    store).  podman writes an OCI archive, docker its ``docker save`` archive: ``ctr images import`` and
    ``podman load`` take either."""
    if shutil.which(engine) is None:
        raise RuntimeError(f"{engine} is missing: install it, or choose another builder (make image IMAGE_BUILDER=...)")
    name = name or default_name()
    target = target or arch()
    work.mkdir(parents=True, exist_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    times: Dict[str, float] = {}
    with open(work / "build.log", "wb") as logf:
        t0 = time.monotonic()
        ctx = context
        if ctx is None:
            ctx = work / "context"
            shutil.rmtree(ctx, ignore_errors=True)
            make_context(ctx, repo)
        cmd = [engine, "build", "-f", str(ctx / "deploy" / "Containerfile"), "-t", name,
               "--build-arg", f"VERSION={version()}"]
        if base:
            cmd += ["--build-arg", f"BASE={base}"]
        if target != arch():  # the build stage still runs on this machine's platform (FROM --platform=$BUILDPLATFORM)
            cmd += ["--platform", f"linux/{target}"]
        run([*cmd, *engine_args, str(ctx)], logf, env)
        times["build"] = time.monotonic() - t0
        tmp = out.with_name(out.name + ".tmp")
        tmp.unlink(missing_ok=True)
        fmt = ["--format", "oci-archive"] if engine == "podman" else []
        run([engine, "save", *fmt, "-o", str(tmp), name], logf, env)
        os.rename(tmp, out)
        if context is None:
            shutil.rmtree(ctx, ignore_errors=True)
        times["total"] = time.monotonic() - t0
    return times


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--emulate"] and argv[2:3] == ["--"]:  # foreign()'s way back in
        return emulate(argv[1], argv[3:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default=arch(), choices=sorted(QEMU_NAMES),
                        help="the image's architecture (default: this machine's)")
    parser.add_argument("--out", type=Path, default=None,
                        help="default packaging/image/out/xpu-cdi_<version>_<arch>.oci.tar")
    parser.add_argument("--work", type=Path, default=None,
                        help="base tarball, buildah's storage (layers cached between builds), the log "
                             "(default build/image, build/image-<arch> for another architecture)")
    parser.add_argument("--name", default=None, help=f"image reference in the archive (default {default_name()})")
    parser.add_argument("--builder", choices=("buildah", *ENGINES), default="buildah",
                        help="buildah: on a Debian 12 root debootstrapped here, no registry (Debian hosts); podman "
                             "or docker: the Containerfile alone, its pinned base from the registry (any distribution)")
    parser.add_argument("--base", default=None,
                        help="with podman or docker: another base image than the Containerfile's pinned one")
    parser.add_argument("--engine-arg", action="append", default=[],
                        help="with podman or docker: an argument for its build (repeatable), e.g. --network=host")
    args = parser.parse_args(argv)
    args.out = args.out or REPO / "packaging" / "image" / "out" / f"xpu-cdi_{version()}_{args.arch}.oci.tar"
    args.work = args.work or REPO / "build" / ("image" if args.arch == arch() else f"image-{args.arch}")
    try:
        if args.builder == "buildah":
            times = build(args.out, args.work, args.name, target=args.arch)
        else:
            times = engine_build(args.builder, args.out, args.work, args.name, target=args.arch, base=args.base,
                                 engine_args=args.engine_arg)
    except RuntimeError as err:
        print(f"image: {err}", file=sys.stderr)
        return 1
    size = args.out.stat().st_size / (1 << 20)
    print(json.dumps({"archive": str(args.out), "mib": round(size, 1),
                      **{k: round(v, 1) for k, v in times.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
