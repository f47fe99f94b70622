"""End to end: generate a spec for a fake host and let real podman 4.3 inject it
through CDI (no hook of ours on this path except the spec's own ldcache hook).

podman reads specs only from /etc/cdi and /var/run/cdi (4.3 has no setting for it), so
each test's podman sees its own spec dir as /etc/cdi (runtimes.Podman), with the spec
under a kind unique to the test.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


import pytest

from support import fakehost
from support.runtimes import ENXIO, Podman, install_spec

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
XPU_CDI = str(Path(sys.executable).parent / "xpu-cdi")


SCRIPT_XPU = ("ls -ln /dev/xpu* ; env | grep ^LD_LIBRARY_PATH= ; "
              "for n in /dev/xpu3 /dev/xpuctrl; do (echo x > $n) 2>&1 | sed \"s|^|$n: |\"; done; "
              "grep ' /usr/local/xpu ' /proc/mounts; cat /usr/local/xpu/version; "
              "(touch /usr/local/xpu/new) 2>&1; true")


class TestKunlunxin:
    def test_one_card(self, podman: Podman, host_root: Path, cdi_dir: Path) -> None:
        """--device kind=3: /dev/xpu3 and /dev/xpuctrl usable (ENXIO), others absent, libs ro, env set."""
        host = fakehost.kunlunxin(host_root, 8)
        kind = install_spec(host, "kunlunxin", cdi_dir, "--ld-library-path-env")
        r = podman.run(["--device", f"{kind}=3"], ["sh", "-c", SCRIPT_XPU])
        assert r.returncode == 0, r.stderr
        out = r.stdout
        assert re.search(r"240,\s+3 .*/dev/xpu3$", out, re.M) and re.search(r"240,\s+200 .*/dev/xpuctrl$", out, re.M)
        assert "/dev/xpu0" not in out and "/dev/xpu4" not in out
        assert f"/dev/xpu3: sh: can't create /dev/xpu3: {ENXIO}" in out
        assert f"/dev/xpuctrl: sh: can't create /dev/xpuctrl: {ENXIO}" in out
        assert "LD_LIBRARY_PATH=/usr/local/xpu/lib64" in out
        assert " ro," in [ln for ln in out.splitlines() if " /usr/local/xpu " in ln][0]
        assert "version:5.0.21" in out and "Read-only file system" in out

    def test_all(self, podman: Podman, host_root: Path, cdi_dir: Path) -> None:
        """--device kind=all: every card node is present and allowed."""
        host = fakehost.kunlunxin(host_root, 8)
        kind = install_spec(host, "kunlunxin", cdi_dir)
        script = "for i in 0 1 2 3 4 5 6 7; do (echo x > /dev/xpu$i) 2>&1; done; true"
        r = podman.run(["--device", f"{kind}=all"], ["sh", "-c", script])
        assert r.returncode == 0, r.stderr
        assert r.stdout.count(ENXIO) == 8

    def test_unknown_device_refused(self, podman: Podman, host_root: Path, cdi_dir: Path) -> None:
        """A device the spec does not define stops the container from being created."""
        host = fakehost.kunlunxin(host_root, 2)
        kind = install_spec(host, "kunlunxin", cdi_dir)
        r = podman.run(["--device", f"{kind}=9"], ["true"])
        assert r.returncode != 0 and "unresolvable CDI devices" in r.stderr

    def test_cgroup_denies_what_was_not_requested(self, podman: Podman, host_root: Path,
                                                  cdi_dir: Path) -> None:
        """The oracle works: a node made inside the container without an allow rule gives EPERM."""
        host = fakehost.kunlunxin(host_root, 2)
        kind = install_spec(host, "kunlunxin", cdi_dir)
        r = podman.run(["--device", f"{kind}=0", "--cap-add", "MKNOD"],
                       ["sh", "-c", "mknod /tmp/x1 c 240 1 && (echo x > /tmp/x1) 2>&1; true"])
        assert r.returncode == 0, r.stderr
        assert "Operation not permitted" in r.stdout


class TestAscend:
    def test_two_npus(self, podman: Podman, host_root: Path, cdi_dir: Path) -> None:
        """Two NPUs plus the manager nodes, driver libs mounted read-only."""
        host = fakehost.ascend(host_root, 4)
        kind = install_spec(host, "ascend", cdi_dir, "--ld-library-path-env")
        script = ("ls /dev/ | grep -E 'davinci|devmm|hisi' ; env | grep ^LD_LIBRARY_PATH= ; "
                  "for n in /dev/davinci1 /dev/davinci_manager; do (echo x > $n) 2>&1; done; "
                  "cat /usr/local/Ascend/driver/version.info; true")
        r = podman.run(["--device", f"{kind}=1", "--device", f"{kind}=2"], ["sh", "-c", script])
        assert r.returncode == 0, r.stderr
        names = set(r.stdout.split())
        assert {"davinci1", "davinci2", "davinci_manager", "devmm_svm", "hisi_hdc"} <= names
        assert "davinci0" not in names and "davinci3" not in names
        assert r.stdout.count(ENXIO) == 2
        assert "LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64:" in r.stdout
        assert "Version=24.1.rc2" in r.stdout

    def test_driver_user_opens_its_own_card(self, podman: Podman, host_root: Path, cdi_dir: Path) -> None:
        """HwHiAiUser-style host (nodes 0660, uid/gid 1000): the spec carries uid, gid and fileMode, and a
        container process running as uid 1000 opens /dev/davinci1 (ENXIO from the fake driver), not EACCES."""
        host = fakehost.ascend(host_root, 2, owner=(fakehost.DRIVER_UID, fakehost.DRIVER_GID))
        kind = install_spec(host, "ascend", cdi_dir)
        script = "ls -ln /dev/davinci1; (echo x > /dev/davinci1) 2>&1; id -u; true"
        r = podman.run(["--device", f"{kind}=1", "--user", "1000:1000"], ["sh", "-c", script])
        assert r.returncode == 0, r.stderr
        assert re.search(r"^crw-rw---- +1 1000 +1000 +241, +1 .*/dev/davinci1$", r.stdout, re.M), r.stdout
        assert ENXIO in r.stdout and "Permission denied" not in r.stdout, r.stdout
        assert r.stdout.split()[-1] == "1000"
