"""In-root path resolution: openat2(RESOLVE_IN_ROOT), the C component walk
and the pure-Python walk give the same answers, and no answer is ever
outside the root; the hook's creating walk makes what is missing in-root."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Dict, Tuple, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpu_cdi import _inroot, _pyresolver, resolver
from xpu_cdi.errors import HookError, SyscallError
from xpu_cdi.hook.rootfs import Root, Undo

Answer = Union[Tuple[int, int], str]

pytestmark = pytest.mark.skipif(resolver.lib is None, reason="compares the C resolver with the Python one")


def build(root: Path) -> None:
    """A small image with every trick: absolute and climbing links, loops, chains, dangling links."""
    (root / "a" / "b").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\n")
    (root / "file").write_text("x")
    links = {
        "abs_link": "/a", "escape_abs": "/etc", "escape_rel": "../../../../../../etc",
        "dotdot": "..", "loop1": "loop2", "loop2": "loop1", "dangling": "/nowhere/at/all",
        "a/up": "../../../a/b", "a/self": ".", "to_file": "/file", "rel_chain": "a/up",
        "proc": "/proc/self/root",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    for i in range(44):  # a chain longer than the kernel's 40 links
        os.symlink(f"/c{i + 1}" if i < 43 else "/a", root / f"c{i}")


PATHS = ["", "/", "a", "/a/b", "a/b/", "abs_link/b", "escape_abs/passwd", "escape_rel/passwd",
         "dotdot/dotdot/a", "../../a", "/../../../a/b", "loop1", "loop1/x", "c0", "c10", "c5/b", "file/x",
         "dangling", "dangling/x", "a/up", "a/self/self/b", "to_file", "rel_chain", "a/./b/../b", "proc",
         "proc/etc", "missing/a", "abs_link/../etc/passwd"]


def answer(fn, rootfd: int, path: str, flags: int) -> Answer:  # type: ignore[no-untyped-def]
    try:
        fd = fn(rootfd, path, flags)
    except SyscallError as err:
        return errno.errorcode[err.errno]
    try:
        st_ = os.fstat(fd)
        assert os.readlink(f"/proc/self/fd/{fd}").startswith(os.readlink(f"/proc/self/fd/{rootfd}")), \
            f"{path!r} resolved outside the root"
        return (st_.st_dev, st_.st_ino)
    finally:
        os.close(fd)


def three(rootfd: int, path: str, flags: int = 0) -> Dict[str, Answer]:
    return {
        "openat2": answer(resolver.resolve_in_root, rootfd, path, flags),
        "c-walk": answer(resolver.resolve_in_root, rootfd, path, flags | resolver.RESOLVE_NO_OPENAT2),
        "python": answer(_pyresolver.resolve_in_root, rootfd, path, flags),
    }


@pytest.fixture
def image(tmp_path: Path):  # type: ignore[no-untyped-def]
    root = tmp_path / "root"
    root.mkdir()
    build(root)
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    yield root, fd
    os.close(fd)


class TestSameAnswers:
    @pytest.mark.parametrize("path", PATHS)
    @pytest.mark.parametrize("nofollow", [False, True], ids=["follow", "nofollow"])
    def test_three_resolvers_agree(self, image, path: str, nofollow: bool) -> None:  # type: ignore[no-untyped-def]
        """openat2, the C walk and the Python walk agree on every trick path."""
        _root, fd = image
        got = three(fd, path, resolver.RESOLVE_NOFOLLOW if nofollow else 0)
        assert len(set(got.values())) == 1, got

    def test_expected_answers(self, image) -> None:  # type: ignore[no-untyped-def]
        """Spot checks: links restart at the root, '..' stops there, loops and chains are ELOOP."""
        root, fd = image
        ino = lambda p: (os.lstat(p).st_dev, os.lstat(p).st_ino)  # noqa: E731
        assert three(fd, "escape_abs/passwd")["python"] == ino(root / "etc" / "passwd")
        assert three(fd, "escape_rel/passwd")["openat2"] == ino(root / "etc" / "passwd")
        assert three(fd, "../../a")["c-walk"] == ino(root / "a")
        assert three(fd, "abs_link/b")["python"] == ino(root / "a" / "b")
        assert set(three(fd, "loop1").values()) == {"ELOOP"}
        assert set(three(fd, "c0").values()) == {"ELOOP"}
        assert three(fd, "c10")["python"] == ino(root / "a")  # 34 links: within the limit
        assert set(three(fd, "file/x").values()) == {"ENOTDIR"}
        assert set(three(fd, "dangling").values()) == {"ENOENT"}
        assert three(fd, "dangling", resolver.RESOLVE_NOFOLLOW)["c-walk"] == ino(root / "dangling")


# Random images: a handful of names, each a dir, a file or a link to a random path.
names = st.sampled_from(["x", "y", "z", "..", "."])
rel_paths = st.lists(names, min_size=1, max_size=4).map("/".join)
targets = st.one_of(rel_paths, rel_paths.map(lambda p: "/" + p), st.just("/"), st.just("../../.."))
entries = st.dictionaries(st.sampled_from(["x", "y", "z", "x/y", "y/z", "x/z", "z/x"]),
                          st.one_of(st.just("dir"), st.just("file"), targets), max_size=6)


def parents_are_real_dirs(root: Path, p: Path) -> bool:
    """Every parent of *p* below *root* is a directory, not a link: an earlier random link
    (``x -> ../../..``) must never take the tree builder out of the root."""
    d = root
    for part in p.relative_to(root).parts[:-1]:
        d = d / part
        if not os.path.lexists(d) or not stat.S_ISDIR(os.lstat(d).st_mode):
            return False
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=entries, path=st.one_of(rel_paths, rel_paths.map(lambda p: "/" + p)), nofollow=st.booleans())
def test_random_images_agree(tmp_path_factory: pytest.TempPathFactory, layout: Dict[str, str], path: str,
                             nofollow: bool) -> None:
    """On random trees of dirs, files and links, the three resolvers agree and stay in the root."""
    root = tmp_path_factory.mktemp("rand")
    for name in sorted(layout, key=len):
        p = root / name
        if os.path.lexists(p) or not parents_are_real_dirs(root, p):
            continue
        kind = layout[name]
        if kind == "dir":
            p.mkdir()
        elif kind == "file":
            p.write_text("f")
        else:
            os.symlink(kind, p)
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        got = three(fd, path, resolver.RESOLVE_NOFOLLOW if nofollow else 0)
    finally:
        os.close(fd)
    assert len(set(got.values())) == 1, (layout, path, got)


class TestCreate:
    def test_creates_inside_where_links_point(self, image) -> None:  # type: ignore[no-untyped-def]
        """ensure() follows the image's links in-root and creates the rest there, journalled."""
        root, _fd = image
        undo = Undo()
        r = Root(str(root), undo)
        try:
            fd = r.ensure("/escape_abs/xpu/lib64", "d")  # /escape_abs -> /etc: inside the root
            os.close(fd)
            assert (root / "etc" / "xpu" / "lib64").is_dir()
            fd = r.ensure("/dangling/file.so", "f")  # dangling -> /nowhere/at/all: made in-root
            os.close(fd)
            assert (root / "nowhere" / "at" / "all" / "file.so").is_file()
            assert undo.rollback() == []
            assert not (root / "etc" / "xpu").exists() and not (root / "nowhere").exists()
        finally:
            r.close()

    def test_wrong_kind_and_bad_paths(self, image) -> None:  # type: ignore[no-untyped-def]
        """An existing file where a dir must go, relative or dotted paths: clear errors."""
        root, _fd = image
        r = Root(str(root), Undo())
        try:
            with pytest.raises(HookError, match="exists in the image but is not a directory"):
                r.ensure("/file", "d")
            with pytest.raises(HookError, match="must be absolute"):
                r.ensure("etc", "d")
            with pytest.raises(HookError, match=r"must not contain '\.' or '\.\.'"):
                r.ensure("/etc/../x", "d")
            with pytest.raises(SyscallError, match="Too many levels of symbolic links"):
                r.ensure("/loop1/x", "d")
        finally:
            r.close()

    def test_walk_errors_carry_errno(self, image) -> None:  # type: ignore[no-untyped-def]
        """_inroot.walk raises OSError with the errno a caller can test."""
        _root, fd = image
        with pytest.raises(OSError) as info:
            _inroot.walk(fd, "file/x")
        assert info.value.errno == errno.ENOTDIR


def test_component_names(tmp_path: Path) -> None:
    """A 256-byte component is ENAMETOOLONG in all three."""
    fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        assert set(three(fd, "a" * 256).values()) == {"ENAMETOOLONG"}
    finally:
        os.close(fd)
