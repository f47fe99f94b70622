"""The driver-upgrade drill's upgrade (issue 28, item 6; docs/fleet.md): a node's fake Ascend
driver replaced by a newer release as the vendor's installer does it.  Used by
tests/fleet/test_fleet_drill.py (the device plugin's way) and test_fleet_dra.py (the DRA way)."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from typing import Iterator

from support import fakehost

DRIVER = "/usr/local/Ascend/driver"
OLD, NEW = "Version=24.1.rc2", "Version=25.0.rc1"
OLD_SEMVER, NEW_SEMVER = "24.1.0-rc2", "25.0.0-rc1"  # as the labels and the slices' driverVersion say them


def upgrade(host: fakehost.FakeHost) -> None:
    """As the vendor's run package does: the old driver dir removed, the new release's in its
    place (here made aside and renamed in, so `watch` never sees half a driver); the release
    adds the topology dir the profile mounts."""
    driver = host.path(DRIVER)
    new = driver.with_name("driver.new")
    fakehost.write(new / "lib64/common/libc_sec.so", "fake 25.0\n", 0o755)
    fakehost.write(new / "lib64/driver/libascend_hal.so", "fake hal 25.0\n", 0o755)
    fakehost.write(new / "include/dsmi_common_interface.h", "/* fake 25.0 */\n")
    fakehost.write(new / "topo/topo.json", "{}\n")
    fakehost.write(new / "version.info", NEW + "\n")
    old = driver.with_name("driver.old")
    os.rename(driver, old)
    os.rename(new, driver)
    shutil.rmtree(old)


@contextmanager
def driver_kept(host: fakehost.FakeHost) -> Iterator[fakehost.FakeHost]:
    """*host*'s driver tree as it was, put back on leaving (the other fleet tests see the 24.1 one)."""
    keep = host.path(DRIVER).with_name("driver.before-drill")
    shutil.copytree(host.path(DRIVER), keep, symlinks=True)
    try:
        yield host
    finally:
        back = host.path(DRIVER)
        shutil.rmtree(back)
        os.rename(keep, back)
