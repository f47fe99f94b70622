#!/usr/bin/env python3
"""A stand-in for Huawei's ``npu-smi``, its vNPU commands only, for tests on hosts with no NPU.

What it implements (syntax from mind-cluster's virtual-instance guide; docs/vendors.md,
"Ascend vNPU templates", has every source):

    npu-smi set -t create-vnpu -i CARD -c CHIP -f TEMPLATE [-v VNPU_ID] [-g VGROUP_ID]
    npu-smi set -t destroy-vnpu -i CARD -c CHIP -v VNPU_ID
    npu-smi info -t info-vnpu -i CARD -c CHIP
    npu-smi info -m                          (the card, chip and logic id of each chip)
    npu-smi set -t vnpu-mode -d 0|1          npu-smi info -t vnpu-mode
    npu-smi set -t vnpu-cfg-recover -d 0|1   npu-smi info -t vnpu-cfg-recover

Templates and what they take are the project's data (src/xpu_cdi/profiles/partitions/ascend.yaml).
It refuses, with ``Status : Error`` and a ``Message :`` line on stdout and exit 1: an unknown
card or chip, a template the chip does not support, a vNPU that does not fit what is left (AI
cores, memory, the 310P's vGroups), a vNPU id outside the chip's range or already used on the
host, destroying a vNPU that does not exist or that a process holds open.  A create makes
``/dev/vdavinci<id>`` (a char node of the state's fake major) under the fake dev root; a destroy
removes it.  State: the JSON file ``$NPU_SMI_STATE`` (made by :func:`init_state`), written
atomically under a lock (``<state>.lock``), so concurrent calls serialise.  Env:
``NPU_SMI_STATE`` (required), ``NPU_SMI_DEV_ROOT`` (default ``/``); :func:`install` writes an
``npu-smi`` that sets both, for callers that pass no env.

What only hardware can show, untested here:
- the real wording, spacing and exit codes of refusals (the vendor documents only the success
  lines; the stand-in's refusal lines are its own);
- the meaning of the info-vnpu Status column and Container ID (shown 0 / 1 when a process
  holds the node, and 000000000000), and whether media engines, AI CPUs and memory are printed
  for a chip (shown NA where the vendor's figure shows NA);
- whether AI CPUs and media engines are a budget (the 310P's table gives more per template than
  the chip's total: they are not enforced), and which mixes of templates a chip refuses (HAMi
  issue 1851 reports 910B2 refusing halves beside quarters: not enforced);
- the exact columns of ``info -m`` (the stand-in prints NPU ID, Chip ID, Chip Logic ID, Chip Name
  and an MCU row per card) and whether a chip's logic id is its /dev/davinci number;
- the vdavinci node's real major and minor, the driver's ``/dev/davinci<id>`` view inside a
  container, vnpu-cfg-recover across a reboot, VM mode.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence
from contextlib import contextmanager

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from xpu_cdi import partitions  # noqa: E402  (the source tree's, for any python3 with pyyaml)

UNSPECIFIED = 4294967295  # -v value meaning "no id given"
MINOR_BASE = 1000  # vdavinci<id> is minor MINOR_BASE + id: clear of the fake cards' and control nodes' minors


class Refused(Exception):
    """One refusal: the Message line."""


def init_state(path: Path, chips: Sequence[Dict[str, Any]], major: int = 241) -> None:
    """A host's NPUs: each ``{"card": N, "chip": M, "name": "310P3", "memory_mib": 24576, "phy_id": P}``
    (phy_id defaults to the chip's position in the list)."""
    out = []
    for n, c in enumerate(chips):
        out.append({"card": c["card"], "chip": c["chip"], "name": c["name"], "phy_id": c.get("phy_id", n),
                    "memory_mib": c.get("memory_mib"), "vnpus": []})
    write_state(path, {"major": major, "mode": "docker", "cfg_recover": True, "chips": out})


def install(dest: Path, state: Path, dev_root: Path, gate: Optional[Path] = None) -> None:
    """An ``npu-smi`` at *dest* running the stand-in on *state* and *dev_root* whatever its caller's env
    (a driver runs its tool with no inherited env): a shell script naming both, and this file.

    *gate*: a FIFO; while it exists, a create-vnpu that made its vNPU then blocks reading it
    (before exiting, its lock released) until a writer opens and closes it: the window between
    the vNPU existing and its caller hearing of it, held open for a test."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    gate_env = f" NPU_SMI_CREATE_GATE='{gate}'" if gate else ""
    dest.write_text(f"#!/bin/sh\nNPU_SMI_STATE='{state}' NPU_SMI_DEV_ROOT='{dev_root}'{gate_env} "
                    f"exec '{sys.executable}' '{Path(__file__).resolve()}' \"$@\"\n")
    dest.chmod(0o755)


def write_state(path: Path, state: Dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def node_path(dev_root: str, vnpu_id: int) -> Path:
    return Path(dev_root) / "dev" / f"vdavinci{vnpu_id}"


def held_open(rdev: int) -> bool:
    """Whether any process holds a char node of *rdev* open (by device number: any mount namespace)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == rdev:
                return True
    return False


def groups(vnpus: List[Dict[str, Any]]) -> Dict[int, List[Dict[str, Any]]]:
    out: Dict[int, List[Dict[str, Any]]] = {}
    for v in vnpus:
        out.setdefault(v["vgroup"], []).append(v)
    return out


def cores_used(model: partitions.ChipModel, vnpus: List[Dict[str, Any]]) -> int:
    """AI cores taken: a vGroup of small templates takes the smallest group's cores."""
    total = 0
    for members in groups(vnpus).values():
        t = model.templates[members[0]["template"]]
        small = model.min_group_aicore is not None and t.aicore < model.min_group_aicore
        total += model.min_group_aicore if small else sum(model.templates[m["template"]].aicore for m in members)
    return total


def memory_used(model: partitions.ChipModel, chip: Dict[str, Any], vnpus: List[Dict[str, Any]]) -> int:
    return sum(model.memory_of(model.templates[v["template"]], chip.get("memory_mib")) or 0 for v in vnpus)


def find_chip(state: Dict[str, Any], card: int, chip: int) -> Dict[str, Any]:
    for c in state["chips"]:
        if c["card"] == card and c["chip"] == chip:
            return c
    have = ", ".join(f"{c['card']}:{c['chip']}" for c in state["chips"]) or "none"
    raise Refused(f"The device {card} chip {chip} does not exist (card:chip here: {have})")


def model_of(chip: Dict[str, Any]) -> partitions.ChipModel:
    data = partitions.builtin("ascend")
    model = data.chip(chip["name"]) if data else None
    if model is None:
        raise Refused(f"The chip {chip['name']} does not support vNPU")
    return model


def create(state: Dict[str, Any], dev_root: str, card: int, chip_id: int, template: str,
           vnpu_id: Optional[int], vgroup: Optional[int]) -> int:
    chip = find_chip(state, card, chip_id)
    model = model_of(chip)
    t = model.templates.get(template)
    if t is None:
        raise Refused(f"The template {template} is not supported on {chip['name']} "
                      f"(supported: {', '.join(model.templates)})")
    ids = model.ids_of(chip["phy_id"])
    used_ids = {v["id"] for c in state["chips"] for v in c["vnpus"]}
    if vnpu_id is None:
        vnpu_id = next((i for i in ids if i not in used_ids), None)
        if vnpu_id is None:
            raise Refused(f"No vnpu id is left in [{ids[0]}, {ids[-1]}] on device {card} chip {chip_id}")
    elif vnpu_id not in ids:
        raise Refused(f"The vnpu id {vnpu_id} is out of range [{ids[0]}, {ids[-1]}] for device {card} chip {chip_id}")
    elif vnpu_id in used_ids:
        raise Refused(f"The vnpu id {vnpu_id} is already used on this server")
    vnpus = chip["vnpus"]
    by_group = groups(vnpus)
    if model.vgroups is None:
        if vgroup is not None:
            raise Refused(f"The vgroup id is not supported on {chip['name']}")
        group = max(by_group, default=-1) + 1
    else:
        small = model.min_group_aicore is not None and t.aicore < model.min_group_aicore
        per_group = model.min_group_aicore // t.aicore if small and model.min_group_aicore else 1
        joinable = [g for g, m in sorted(by_group.items())
                    if small and all(v["template"] == template for v in m) and len(m) < per_group]
        free = [g for g in range(model.vgroups) if g not in by_group]
        if vgroup is not None:
            if not 0 <= vgroup < model.vgroups:
                raise Refused(f"The vgroup id {vgroup} is out of range [0, {model.vgroups - 1}]")
            if vgroup not in joinable and vgroup not in free:
                raise Refused(f"The vgroup {vgroup} of device {card} chip {chip_id} is in use")
            group = vgroup
        elif joinable or free:
            group = (joinable or free)[0]
        else:
            raise Refused(f"Not enough vgroups left on device {card} chip {chip_id}: all {model.vgroups} are used")
    new = {"id": vnpu_id, "template": template, "vgroup": group}
    after = vnpus + [new]
    if cores_used(model, after) > model.aicore:
        raise Refused(f"Not enough AI cores left on device {card} chip {chip_id}: {template} needs {t.aicore}, "
                      f"{model.aicore - cores_used(model, vnpus)} free of {model.aicore}")
    total_mem = chip.get("memory_mib") or model.memory_mib
    if total_mem is not None and memory_used(model, chip, after) > total_mem:
        raise Refused(f"Not enough memory left on device {card} chip {chip_id}: {template} needs "
                      f"{model.memory_of(t, total_mem)} MB, {total_mem - memory_used(model, chip, vnpus)} MB free")
    path = node_path(dev_root, vnpu_id)
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(state["major"], MINOR_BASE + vnpu_id))
    os.chmod(path, 0o666)  # mknod's mode goes through the umask
    vnpus.append(new)
    return vnpu_id


def destroy(state: Dict[str, Any], dev_root: str, card: int, chip_id: int, vnpu_id: int) -> None:
    chip = find_chip(state, card, chip_id)
    v = next((v for v in chip["vnpus"] if v["id"] == vnpu_id), None)
    if v is None:
        raise Refused(f"The vnpu {vnpu_id} does not exist on device {card} chip {chip_id}")
    if held_open(os.makedev(state["major"], MINOR_BASE + vnpu_id)):
        raise Refused(f"The vnpu {vnpu_id} is in use: stop what holds /dev/vdavinci{vnpu_id} first")
    try:
        node_path(dev_root, vnpu_id).unlink()
    except FileNotFoundError:
        pass
    chip["vnpus"].remove(v)


def info_vnpu(state: Dict[str, Any], card: int, chip_id: int) -> List[str]:
    chip = find_chip(state, card, chip_id)
    model = model_of(chip)
    vnpus = chip["vnpus"]
    inference = model.vgroups is not None  # AI CPUs and vGroups are printed for the inference series only
    total_mem = chip.get("memory_mib") or model.memory_mib
    mem = (f"{(total_mem - memory_used(model, chip, vnpus)) // 1024}/{total_mem // 1024}" if total_mem else "NA/NA")
    aicpu = "NA/NA"
    if inference and model.aicpu is not None:
        taken = sum(model.templates[v["template"]].aicpu or 0 for v in vnpus)
        aicpu = f"{max(model.aicpu - taken, 0)}/{model.aicpu}"
    bar = "+" + "-" * 79 + "+"

    def row(text: str) -> str:
        return f"| {text:<78}|"

    cells = [f"{model.aicore - cores_used(model, vnpus)}/{model.aicore}", mem, aicpu] + ["NA/NA"] * 6
    out = [bar, row("NPU resource static info as follow:"),
           row("Format:Free/Total                   NA: Currently, query is not supported."),
           row("AICORE    Memory    AICPU    VPC    VENC    VDEC    JPEGD    JPEGE    PNGD"),
           row("          GB"), "|" + "=" * 79 + "|",
           row("".join(f"{c:<10}" for c in cells)), bar, row(f"Total number of vnpu: {len(vnpus)}"), bar,
           row(" Vnpu ID  |  Vgroup ID     |  Container ID  |  Status  |  Template Name"), bar]
    for v in sorted(vnpus, key=lambda v: v["id"]):
        busy = held_open(os.makedev(state["major"], MINOR_BASE + v["id"]))
        group = str(v["vgroup"]) if inference else "NA"
        out += [row(f" {v['id']:<9}|  {group:<14}|  {'000000000000':<14}|  {int(busy):<8}|  {v['template']}"), bar]
    return out


def chip_map(state: Dict[str, Any]) -> List[str]:
    """``npu-smi info -m``: a row per chip (NPU ID, Chip ID, Chip Logic ID, Chip Name), the logic id
    taken equal to the physical id; the real tool also lists each card's MCU with logic id ``-``."""
    out = [f"        {'NPU ID':<31}{'Chip ID':<31}{'Chip Logic ID':<31}Chip Name"]
    for c in state["chips"]:
        out.append(f"        {c['card']:<31}{c['chip']:<31}{c['phy_id']:<31}Ascend {c['name']}")
    for card in sorted({c["card"] for c in state["chips"]}):
        out.append(f"        {card:<31}{1 + max(c['chip'] for c in state['chips'] if c['card'] == card):<31}"
                   f"{'-':<31}Mcu")
    return out


def _args(argv: Sequence[str]) -> Dict[str, str]:
    """``-t create-vnpu -i 0 ...`` -> {"t": "create-vnpu", "i": "0", ...}; ``-m`` takes no value."""
    out: Dict[str, str] = {}
    it = iter(argv)
    for flag in it:
        if not (flag.startswith("-") and len(flag) == 2):
            raise Refused(f"Invalid parameter {flag}")
        if flag == "-m":
            out["m"] = ""
            continue
        value = next(it, None)
        if value is None:
            raise Refused(f"The parameter {flag} needs a value")
        out[flag[1]] = value
    return out


def _int(args: Dict[str, str], key: str, what: str) -> int:
    if key not in args:
        raise Refused(f"The parameter -{key} ({what}) is required")
    try:
        return int(args[key])
    except ValueError:
        raise Refused(f"The {what} {args[key]!r} is not a number") from None


def run(argv: Sequence[str]) -> List[str]:
    """The output lines of one call.  Raises Refused."""
    if len(argv) < 1 or argv[0] not in ("info", "set"):
        raise Refused("Usage: npu-smi info|set -t TYPE ... (the stand-in knows only the vNPU commands)")
    verb, args = argv[0], _args(argv[1:])
    what = args.get("t", "")
    state_path = Path(os.environ.get("NPU_SMI_STATE", ""))
    if not state_path.name or not state_path.is_file():
        raise Refused("NPU_SMI_STATE names no state file: the stand-in knows no NPU (support.npusmi.init_state)")
    dev_root = os.environ.get("NPU_SMI_DEV_ROOT", "/")
    with locked(state_path):
        state = json.loads(state_path.read_text())
        if verb == "info" and what == "info-vnpu":
            return info_vnpu(state, _int(args, "i", "device id"), _int(args, "c", "chip id"))
        if verb == "info" and not what and args.get("m") is not None:
            return chip_map(state)
        if verb == "info" and what == "vnpu-mode":
            return [f"vnpu-mode              : {state['mode']}"]
        if verb == "info" and what == "vnpu-cfg-recover":
            return [f"VNPU config recover mode : {'Enable' if state['cfg_recover'] else 'Disable'}"]
        if verb == "set" and what == "create-vnpu":
            if "f" not in args:
                raise Refused("The parameter -f (vnpu_config) is required")
            given = _int(args, "v", "vnpu id") if "v" in args else None
            group = _int(args, "g", "vgroup id") if "g" in args else None
            create(state, dev_root, _int(args, "i", "device id"), _int(args, "c", "chip id"), args["f"],
                   None if given == UNSPECIFIED else given, group)
            write_state(state_path, state)
            return ["       Status : OK", "       Message : Create vnpu success"]
        if verb == "set" and what == "destroy-vnpu":
            vnpu = _int(args, "v", "vnpu id")
            destroy(state, dev_root, _int(args, "i", "device id"), _int(args, "c", "chip id"), vnpu)
            write_state(state_path, state)
            return ["       Status : OK", f"       Message : Destroy vnpu {vnpu} success"]
        if verb == "set" and what in ("vnpu-mode", "vnpu-cfg-recover"):
            d = args.get("d")
            if d not in ("0", "1"):
                raise Refused(f"The value of -d for {what} must be 0 or 1")
            if what == "vnpu-mode":
                state["mode"] = "docker" if d == "0" else "VM"
                write_state(state_path, state)
                return ["       Status : OK", "       Message : The vnpu-mode is set successfully."]
            state["cfg_recover"] = d == "1"
            write_state(state_path, state)
            mode = "Enable" if d == "1" else "Disable"
            return ["       Status : OK", f"       Message : The VNPU config recover mode {mode} is set successfully."]
    raise Refused(f"The stand-in does not implement npu-smi {verb} -t {what or '?'}")


def main(argv: Sequence[str]) -> int:
    try:
        lines = run(argv)
    except Refused as err:
        print("       Status : Error")
        print(f"       Message : {err}")
        return 1
    gate = os.environ.get("NPU_SMI_CREATE_GATE")
    if gate and list(argv[:3]) == ["set", "-t", "create-vnpu"] and os.path.exists(gate) \
            and stat.S_ISFIFO(os.stat(gate).st_mode):
        with open(gate) as f:  # blocks until the test opens it for writing
            f.read()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
