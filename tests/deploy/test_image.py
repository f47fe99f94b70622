"""The DaemonSet's image as `make image` builds it (tests/support/imagebuild.py: once per input,
cached): an OCI archive that `podman load` and `ctr images import` take under the name
kubelet looks up; inside, the xpu-cdi package and nothing but Debian's minimal base and
what the package depends on; statically linked host binaries; and the same files and
packages as the Containerfile built by podman, as users with a registry build it."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Dict, Iterator, Set, Tuple

import pytest

from support import elf, imagebuild, runtimes
from xpu_cdi._version import VERSION
from xpu_cdi.host import install

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]

NAME = f"docker.io/library/xpu-cdi:{VERSION}"


@pytest.fixture(scope="module")
def image() -> Dict[str, object]:
    return imagebuild.image()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, image: Dict[str, object]) -> Iterator[runtimes.Podman]:
    """A private podman store with the archive loaded."""
    runtimes.require("podman", "runc")
    p = runtimes.Podman(Path(tempfile.mkdtemp(prefix="xp-img-")))
    try:
        r = p.run_cmd(["load", "-i", str(image["archive"])], timeout=300)
        assert r.returncode == 0, r.stderr
        assert f"Loaded image: {NAME}" in r.stdout + r.stderr, r.stdout + r.stderr
        yield p
    finally:
        p.close()


def mounted(store: runtimes.Podman, ref: str) -> Path:
    """The image's root, mounted read-only in this namespace (store.run_cmd runs podman in a private
    one; Podman.close() unmounts what is left under its store)."""
    r = subprocess.run(["podman", "image", "mount", ref], env=store.env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip())


def listing(root: Path) -> Dict[str, Tuple]:
    """Every path of an image root: type, mode, owner, size (regular files), link target."""
    out: Dict[str, Tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = "/" + os.path.relpath(p, root)
            out[rel] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
                        st.st_size if stat.S_ISREG(st.st_mode) else 0,
                        os.readlink(p) if stat.S_ISLNK(st.st_mode) else "")
    return out


# what differs between two builds of the same inputs: logs, caches, backups dpkg and
# debconf keep of their previous state, and bytecode py3compile writes at install time
# /etc/hostname, hosts, resolv.conf: the builder's placeholders for what it mounts during RUN
# (empty; their mode differs between buildah and podman releases: 0755 vs 0644 on Debian 13)
VOLATILE = re.compile(r"^/var/log/|^/var/cache/(debconf|ldconfig)/|^/var/lib/dpkg/[^/]*-old$|"
                      r"\.pyc$|/__pycache__$|^/etc/(hostname|hosts|resolv\.conf)$")


def packages(root: Path) -> Dict[str, Dict[str, str]]:
    """The installed packages of an image from its dpkg status file."""
    out = {}
    for para in (root / "var/lib/dpkg/status").read_text().split("\n\n"):
        fields = dict(re.findall(r"^([\w-]+): ?(.*)$", para, re.M))
        if fields.get("Status", "").endswith(" installed"):
            out[fields["Package"]] = fields
    return out


def depends_closure(pkgs: Dict[str, Dict[str, str]], start: Set[str]) -> Set[str]:
    provides: Dict[str, Set[str]] = {}
    for name, f in pkgs.items():
        for p in re.split(r",\s*", f.get("Provides", "")):
            if p:
                provides.setdefault(p.split()[0], set()).add(name)
    seen, todo = set(), list(start)
    while todo:
        name = todo.pop()
        if name in seen or name not in pkgs:
            continue
        seen.add(name)
        for field in ("Depends", "Pre-Depends"):
            for clause in re.split(r",\s*", pkgs[name].get(field, "")):
                alts = [a.split()[0].split(":")[0] for a in clause.split("|") if a.strip()]
                for a in alts:
                    found = ({a} & set(pkgs)) | provides.get(a, set())
                    if found:
                        todo.extend(found)
                        break
    return seen


def test_archive_names_the_image_kubelet_looks_up(image: Dict[str, object]) -> None:
    import tarfile

    with tarfile.open(str(image["archive"])) as t:
        index = json.load(t.extractfile("index.json"))  # type: ignore[arg-type]
        names = set(t.getnames())
    assert [m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"]] == [NAME]
    assert "oci-layout" in names


MACHINES = {"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}


def check_architecture(image: Dict[str, object], tmp_path: Path) -> Path:
    """The image's config names *image*'s architecture, and the static binaries it carries for the host
    and its xpu-cdi-hook are ELF for that machine (read from the archive's layers, no runtime
    involved); the image's root, its layers unpacked in order (whiteouts left as files)."""
    import tarfile

    arch = str(image["arch"])
    root = tmp_path / "root"
    root.mkdir()
    with tarfile.open(str(image["archive"])) as t:
        def blob(digest: str) -> bytes:
            return t.extractfile("blobs/" + digest.replace(":", "/")).read()  # type: ignore[union-attr]

        (entry,) = json.load(t.extractfile("index.json"))["manifests"]  # type: ignore[arg-type]
        manifest = json.loads(blob(entry["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        assert (config["os"], config["architecture"]) == ("linux", arch)
        for layer in manifest["layers"]:
            path = tmp_path / "layer"
            path.write_bytes(blob(layer["digest"]))
            subprocess.run(["tar", "--numeric-owner", "-xf", str(path), "-C", str(root)], check=True)
            path.unlink()
    binaries = [root / install.IMAGE_DIR.lstrip("/") / n for n in install.NAMES]
    for path in binaries:
        h = elf.header(path)
        assert (h["machine"], h["interp"]) == (MACHINES[arch], False), (path, h)
    h = elf.header(root / "usr/bin/xpu-cdi-hook")  # the package's own, dynamically linked
    assert (h["machine"], h["interp"]) == (MACHINES[arch], True), h
    return root


def test_architecture_of_the_image_and_its_binaries(image: Dict[str, object], tmp_path: Path) -> None:
    """`make image`: the build machine's architecture, in the config and the binaries."""
    assert image["arch"] == imagebuild.builder().arch()
    root = check_architecture(image, tmp_path)
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)  # 200 MB: not kept for pytest


def test_arm64_image(tmp_path: Path) -> None:
    """`make image ARCH=arm64` on this amd64 machine (the build stage's outputs cross-compiled, the
    install under qemu-user, see packaging/image/build.py): an arm64 image whose binaries are aarch64,
    which holds this checkout's code (the natively made .deb, not a cached older one), and whose
    xpu-cdi runs (under qemu, in the image's root) and says its version."""
    b = imagebuild.builder()
    assert b.arch() == "amd64", "the test cross-builds from amd64"
    arm64 = imagebuild.image("arm64")
    root = check_architecture(arm64, tmp_path)
    try:
        assert_checkouts_code(root)
        r = subprocess.run(b.foreign(["chroot", str(root), "/usr/bin/xpu-cdi", "--version"], "arm64"),
                           capture_output=True, text=True, timeout=600)
        assert (r.returncode, r.stdout.strip()) == (0, f"xpu-cdi, version {VERSION}"), r.stderr
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)


def test_ctr_imports_it(image: Dict[str, object], tmp_path: Path) -> None:
    """containerd (the host's) imports the archive into kubelet's namespace under that name, unpacked."""
    c = runtimes.Containerd(tmp_path / "ctrd")
    try:
        r = c.ctr("images", "import", str(image["archive"]), timeout=300)
        assert r.returncode == 0, r.stderr
        listed = c.ctr("images", "ls", "-q").stdout.split()
        assert NAME in listed, listed
        r = c.ctr("run", "--rm", NAME, "t1", "/usr/bin/xpu-cdi", "--version", timeout=120)
        assert (r.returncode, r.stdout.strip()) == (0, f"xpu-cdi, version {VERSION}"), r.stderr
    finally:
        c.stop()


def test_podman_runs_it(store: runtimes.Podman) -> None:
    r = store.run_cmd(["run", "--rm", "--network", "none", NAME, "--version"])
    assert (r.returncode, r.stdout.strip()) == (0, f"xpu-cdi, version {VERSION}"), r.stderr
    r = store.run_cmd(["image", "inspect", NAME, "--format", "{{json .Config}}"], check=True)
    config = json.loads(r.stdout)
    assert config["Entrypoint"] == ["/usr/bin/xpu-cdi"] and config["Cmd"][0] == "watch"


def test_host_binaries_are_the_static_build(store: runtimes.Podman) -> None:
    root = mounted(store, NAME)
    for name in install.NAMES:
        path = root / install.IMAGE_DIR.lstrip("/") / name
        st = path.stat()
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
        headers = subprocess.run(["readelf", "--program-headers", "--dynamic", str(path)], capture_output=True,
                                 text=True, check=True).stdout
        assert "INTERP" not in headers and "(NEEDED)" not in headers, name
    # the .deb's own binaries stay the dynamically linked ones (distribution security fixes)
    headers = subprocess.run(["readelf", "--dynamic", str(root / "usr/bin/xpu-cdi-hook")], capture_output=True,
                             text=True, check=True).stdout
    assert "libyajl.so.2" in headers


def test_only_the_base_and_what_the_package_needs(store: runtimes.Podman) -> None:
    """Every installed package is Debian's minimal base (Priority required, and apt) or needed by
    xpu-cdi through Depends/Pre-Depends; no compiler or build tool came along, no apt lists, no docs."""
    root = mounted(store, NAME)
    pkgs = packages(root)
    base = {n for n, f in pkgs.items() if f.get("Priority") == "required"} | {"apt"}
    needed = depends_closure(pkgs, base | {"xpu-cdi"})
    assert pkgs["xpu-cdi"]["Version"] == VERSION
    assert set(pkgs) - needed == set(), "installed but needed by nothing"
    assert not {"gcc", "gcc-12", "debhelper", "dpkg-dev", "libyajl-dev", "make"} & set(pkgs)
    assert list((root / "var/lib/apt/lists").glob("*Packages*")) == []
    docs = [p.name for p in (root / "usr/share/doc").rglob("*") if p.is_file() and p.name != "copyright"]
    assert docs == [] or set(docs) <= {"config.yaml"}, docs[:10]  # xpu-cdi's example config is data


def podman_build_listing(store: runtimes.Podman, image: Dict[str, object]) -> Dict[str, object]:
    """The Containerfile built by podman on the same base from the checkout (its .containerignore
    applying): its file listing and package versions, cached per input (a podman build takes 2 minutes)."""
    cache = imagebuild.DIR / f"podman-build-{image['key']}.json"
    with open(imagebuild.DIR / ".lock-podman-build", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cache.is_file():
            return json.loads(cache.read_text())
        b = imagebuild.builder()
        (base_tar,) = imagebuild.WORK.glob(f"base-{b.RELEASE}-*.tar")
        base = "localhost/xpu-cdi-base:podman"
        store.run_cmd(["import", "-q", "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                       "/sbin:/bin", str(base_tar), base], check=True, timeout=300)
        # make image IMAGE_BUILDER=podman's own code, with the checkout itself as the context, as a user
        # building by hand gives it (podman's .containerignore keeps out the venv, build output, the tests)
        repo = imagebuild.REPO
        work = Path(tempfile.mkdtemp(prefix="xp-img-podman-"))
        try:
            b.engine_build("podman", work / "podman.oci.tar", work, "localhost/xpu-cdi-podman:test", repo,
                           base=base, context=repo, engine_args=["--pull=never", "--network", "host"],
                           env=store.env)
            # the archive make image writes: an OCI layout naming the image
            with tarfile.open(work / "podman.oci.tar") as tar:
                index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
            names = [m.get("annotations", {}).get("org.opencontainers.image.ref.name", "") for m in index["manifests"]]
            assert any(n.endswith("xpu-cdi-podman:test") for n in names), names
        except RuntimeError:
            raise AssertionError((work / "build.log").read_text()[-6000:]) from None
        finally:
            shutil.rmtree(work, ignore_errors=True)
        root = mounted(store, "localhost/xpu-cdi-podman:test")
        data = {"files": {k: list(v) for k, v in listing(root).items()},
                "packages": {n: f["Version"] for n, f in packages(root).items()}}
        cache.write_text(json.dumps(data))
        return data


def test_same_contents_as_the_containerfile_built_by_podman(store: runtimes.Podman,
                                                           image: Dict[str, object]) -> None:
    """`make image` (buildah) and `podman build -f deploy/Containerfile` on the same base give the
    same packages at the same versions and the same files (type, mode, owner, size, link target),
    but for logs, caches and bytecode."""
    theirs = podman_build_listing(store, image)
    root = mounted(store, NAME)
    ours = {k: list(v) for k, v in listing(root).items()}
    assert {n: f["Version"] for n, f in packages(root).items()} == theirs["packages"]
    strip = lambda d: {k: v for k, v in d.items() if not VOLATILE.search(k)}  # noqa: E731
    a, b = strip(ours), strip(theirs["files"])  # type: ignore[arg-type]
    only = sorted(set(a) ^ set(b))
    differ = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    assert (only, differ) == ([], []), (only[:20], [(k, a[k], b[k]) for k in differ[:20]])
    assert len(a) > 5000


def assert_checkouts_code(root: Path) -> None:
    """Every Python file of the package installed in image root *root* is this checkout's, byte for byte,
    and no other is there."""
    installed = root / "usr/lib/python3/dist-packages/xpu_cdi"
    src = imagebuild.REPO / "src" / "xpu_cdi"
    ours = {str(p.relative_to(src)): p.read_bytes() for p in src.rglob("*.py")}
    # pyproject.toml's package-dir: xpu_cdi.schemas is the checkout's schemas/
    ours.update({f"schemas/{p.name}": p.read_bytes() for p in (imagebuild.REPO / "schemas").glob("*.py")})
    theirs = {str(p.relative_to(installed)): p.read_bytes() for p in installed.rglob("*.py")}
    assert sorted(theirs) == sorted(ours)
    assert [k for k in ours if ours[k] != theirs[k]] == []


def test_the_image_holds_this_checkouts_code(store: runtimes.Podman) -> None:
    """A layer cache that kept an older .deb (as a RUN --mount of the build stage made buildah do)
    fails here."""
    assert_checkouts_code(mounted(store, NAME))
