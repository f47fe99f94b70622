"""Device access in the container's cgroup.

A node the hook creates is visible in the container, but the cgroup
device controller denies it until a rule allows it:

* cgroup v1: one ``c MAJ:MIN rwm`` per write(2) to the container's
  ``devices.allow`` (the kernel applies only the first rule of a write);
* cgroup v2: there is no file to write; the runtime attached an eBPF
  program compiled from ``linux.resources.devices``.  The hook replaces it
  with a copy that also allows the new devices (C: ``hook.c``), keeping the
  old one to put back if a later step fails.  If the kernel refuses, the
  error names the two paths that need no hook: CDI mode or the wrapper.

The cgroup directory is opened in the runtime's mount namespace, before
the hook joins the container's.
"""

from __future__ import annotations

import os

from .. import resolver
from ..errors import HookError, SyscallError
from .rootfs import Undo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence, Tuple

BPF_TYPES = {"c": 2, "b": 1}
BPF_ACCESS = {"m": 1, "r": 2, "w": 4}
FIX = ("inject the devices through CDI instead (podman --device, CRI-O, containerd >= 1.7 with "
       "enable_cdi) or run the container with the xpu-container-runtime wrapper, which puts them in "
       "config.json so that the runtime allows them itself")


class Target:
    """The container's device cgroup, opened."""

    __slots__ = ("version", "path", "fd")

    def __init__(self, version: int, path: str, fd: int) -> None:
        self.version, self.path, self.fd = version, path, fd

    def close(self) -> None:
        """Close the directory fd."""
        os.close(self.fd)


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def cgroup_mounts(mountinfo: str) -> "List[Tuple[str, str, str, List[str]]]":
    """``(mountpoint, root, fstype, super options)`` of every cgroup mount."""
    out = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3 or not rfields[0].startswith("cgroup"):
            continue
        out.append((_unescape(fields[4]), _unescape(fields[3]), rfields[0], rfields[2].split(",")))
    return out


def proc_cgroups(text: str) -> "Dict[str, str]":
    """``/proc/PID/cgroup`` as controller -> path; the v2 entry is ``""``."""
    out: "Dict[str, str]" = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            out[controller] = parts[2]
    return out


def _below(mountpoint: str, root: str, path: str) -> str:
    """The directory of cgroup *path* in a hierarchy mounted at *mountpoint*
    whose mount shows the hierarchy from *root*."""
    if root != "/" and (path == root or path.startswith(root.rstrip("/") + "/")):
        path = path[len(root.rstrip("/")):]
    return os.path.join(mountpoint, path.lstrip("/"))


def locate(mountinfo: str, cgroups: str) -> "Tuple[int, str]":
    """``(1 or 2, directory)`` of the device cgroup, deciding the version as
    runc does: cgroup2 on /sys/fs/cgroup is v2; else the v1 devices
    controller; else any cgroup2 mount.

    Raises:
        HookError: no device controller, or the process is not in it.
    """
    mounts = cgroup_mounts(mountinfo)
    paths = proc_cgroups(cgroups)
    unified = [m for m in mounts if m[2] == "cgroup2"]
    v1 = [m for m in mounts if m[2] == "cgroup" and "devices" in m[3]]
    if any(m[0] == "/sys/fs/cgroup" for m in unified) or (not v1 and unified):
        if "" not in paths:
            raise HookError("cgroup v2 is mounted but the container is in no cgroup v2 group")
        mount = next((m for m in unified if m[0] == "/sys/fs/cgroup"), unified[0])
        return 2, _below(mount[0], mount[1], paths[""])
    if v1:
        if "devices" not in paths:
            raise HookError("the container is in no cgroup v1 devices group: cannot allow its devices")
        return 1, _below(v1[0][0], v1[0][1], paths["devices"])
    raise HookError("no cgroup device controller is mounted (neither v1 devices nor cgroup2)")


def open_target(pid: int) -> Target:
    """The device cgroup of process *pid*, opened (runtime mount namespace).

    Raises:
        HookError: it cannot be found or opened.
    """
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            cgroups = f.read()
        with open("/proc/self/mountinfo") as f:
            mountinfo = f.read()
    except OSError as err:
        raise HookError(f"cannot read the cgroups of container process {pid}: {err.strerror}") from None
    version, path = locate(mountinfo, cgroups)
    # v2 needs a readable fd (bpf(2) refuses O_PATH); v1 only *at() calls
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC if version == 2 else \
        os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        return Target(version, path, os.open(path, flags))
    except OSError as err:
        raise HookError(f"cgroup {path!r} of container process {pid}: {err.strerror}") from None


def rule_of(node: "Dict[str, object]") -> "Optional[Tuple[str, int, int, str]]":
    """The cgroup rule a CDI device node needs, or None (a fifo needs none).

    Raises:
        HookError: a bad type or permissions string.
    """
    kind = node.get("type") or "c"
    if kind == "p":
        return None
    if kind == "u":
        kind = "c"
    perms = node.get("permissions") or "rwm"
    if kind not in BPF_TYPES:
        raise HookError(f"device node {node.get('path')!r}: type {kind!r} must be c, b, u or p")
    if not isinstance(perms, str) or not perms or any(c not in "rwm" for c in perms):
        raise HookError(f"device node {node.get('path')!r}: permissions {perms!r} must be a subset of 'rwm'")
    return str(kind), int(node["major"]), int(node["minor"]), "".join(c for c in "rwm" if c in perms)  # type: ignore[call-overload]


def allow_v1(target: Target, rules: "Sequence[Tuple[str, int, int, str]]") -> None:
    """Append each rule to ``devices.allow``, one write(2) per rule.

    No undo: if the hook fails the runtime removes the container's cgroup.

    Raises:
        HookError: the kernel refused a rule (e.g. the parent cgroup denies it).
    """
    for kind, major, minor, perms in rules:
        line = f"{kind} {major}:{minor} {perms}"
        try:
            fd = os.open("devices.allow", os.O_WRONLY | os.O_CLOEXEC, dir_fd=target.fd)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError as err:
            raise HookError(f"cgroup v1: cannot allow {line!r} in {target.path!r}: {err.strerror} "
                            f"(a parent cgroup must allow the device too)") from None


def allow_v2(target: Target, rules: "Sequence[Tuple[str, int, int, str]]", undo: Undo) -> int:
    """Replace each device program of the cgroup by one that also allows
    *rules*; return how many were replaced (0: no program, all allowed).

    Raises:
        HookError: the kernel refused (the message names the fix).
    """
    words = [(BPF_TYPES[k], major, minor, sum(BPF_ACCESS[c] for c in perms))
             for k, major, minor, perms in rules]
    for attempt in range(3):
        done = 0
        try:
            ids, flags = resolver.bpf_dev_query(target.fd)
            for prog_id in ids:
                old_fd, new_fd = resolver.bpf_dev_patch(target.fd, prog_id, flags, words)
                undo.keep_fd(old_fd)
                undo.keep_fd(new_fd)
                undo.push(f"restore device program {prog_id} of {target.path!r}",
                          resolver.bpf_dev_restore, target.fd, old_fd, new_fd, flags)
                done += 1
            return done
        except SyscallError as err:
            if err.errno == 11 and done == 0 and attempt < 2:  # EAGAIN: replaced meanwhile, query again
                continue
            raise HookError(f"cgroup v2: cannot add the devices to {target.path!r} ({err}); {FIX}") from None
    raise AssertionError("unreachable")  # pragma: no cover
