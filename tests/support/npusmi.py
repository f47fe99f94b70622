#!/usr/bin/env python3
"""A stand-in for Huawei's ``npu-smi``, its vNPU commands only, for tests on hosts with no NPU.

Written from the vendor's own source and docs, never from this project's data (a stand-in that
shares the product's assumptions cannot find their mistakes).  Sources, shortened below:

* **npucli** -- the npu-smi source in a public mirror of the Ascend driver tree on GitHub
  (found by searching its code for ``check_create_vnpu_param``), by function:
  ``set_chip_create_vdevice``, ``check_create_vnpu_param``, ``set_chip_create_vdevice_for_310P_910``,
  ``set_chip_destroy_vdevice_for_310P_910``, ``get_valid_vdev_id``, ``print_vnpu_mode_check_result``
  (declared in ``npu_set_print.h``), ``print_mapping_info``, ``print_mapping_info_910_93``, the
  phyid-remap printer (``dcmi_get_device_logicid_from_phyid``), ``check_vdev_template_param`` /
  ``set_create_vdev_param``; the error codes of ``npu_error_code.h``'s neighbour header
  (``NPU_ERR_CODE_BASE`` -9000: INVALID_PARAMETER -9001, INNER_ERR -9005, NOT_SUPPORT -9255;
  ``dcmi_to_npu_error_code`` falls back to INNER_ERR).  The exit status is their low byte (215, 211,
  217): the issue's report of 217 and 215 matches, ``main`` itself was not read.
* **DCMI** -- the same tree's ``dcmi_virtual_intf``-side tables ``g_310p_24G_template``,
  ``g_310p_48G_template``, ``g_910_16G_template``, ``g_910_32G_template``, ``g_910B_bin{0,1,2}_template``
  (AI cores, memory MB, AI CPUs, VPC, VENC, VDEC, JPEGD, JPEGE per template).
* **MC** -- mind-cluster ``docs/zh/scheduling/usage/virtual_instance.md`` (commands, id ranges,
  vGroups, info-vnpu, vnpu-mode, vnpu-cfg-recover, success lines).
* **HA-ts** -- hiascend troubleshooting_0194 (the 310P chip's totals: 8 AI cores, 7 AI CPUs, VPC 12,
  VDEC 12, JPEGD 16, JPEGE 8, VENC 3).

Commands: ``set -t create-vnpu -i CARD -c CHIP -f TEMPLATE [-v ID] [-g VGROUP]``,
``set -t destroy-vnpu -i CARD -c CHIP -v ID``, ``info -t info-vnpu -i CARD -c CHIP``, ``info -m``,
``info -t phyid-remap -p PHY``, ``set/info -t vnpu-mode``, ``set/info -t vnpu-cfg-recover``.

A create makes ``/dev/vdavinci<id>`` (a char node of the state's fake major) under the fake dev
root; a destroy removes it.  State: the JSON file ``$NPU_SMI_STATE`` (:func:`init_state`), written
atomically under a lock, so concurrent calls serialise.  Env: ``NPU_SMI_STATE`` (required),
``NPU_SMI_DEV_ROOT`` (default ``/``); :func:`install` writes an ``npu-smi`` that sets both.

Not found in the sources, so the stand-in's own choice (unconfirmed on hardware):
- the exit status of a driver failure (``create vnpu failed.``, ``destroy vnpu N failed.``): npucli
  returns ``dcmi_to_npu_error_code`` of the driver's code, which the source does not show for these
  cases; the stand-in exits 211 (INNER_ERR, the mapping's fallback);
- which driver failure the memory, vGroup and id checks give (all ``create vnpu failed.``);
- the chip's media totals on 910B (the DCMI tables give only each template's share): 910B4's
  are its ``_m`` template's (MC: ``m`` = all media engines), the others' two of the half template;
  AI CPU totals on 910B (HAMi's device configmap: 6 on 910B1/B2, 7 else);
- the exact line ``Error parameter of -f`` for an unknown template (check_vdev_template_param
  returns INVALID_PARAMETER; the printing caller was not found);
- info-vnpu's Status / Container ID columns, vdavinci majors and minors, vnpu-cfg-recover across a
  reboot, VM mode beyond its refusal; the A3 (910_93) templates (no DCMI table found: not made).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence

UNSPECIFIED = 4294967295  # -v value meaning "no id given" (MC)
MINOR_BASE = 1000  # vdavinci<id> is minor MINOR_BASE + id: clear of the fake cards' and control nodes' minors

# npucli npu_error_code.h: NPU_ERR_CODE_BASE - n; main's return value, so the exit status is its low byte
INVALID_PARAMETER = -9001 & 0xFF  # 215
INNER_ERR = -9005 & 0xFF  # 211
NOT_SUPPORT = -9255 & 0xFF  # 217
MEDIA = ("vpc", "venc", "vdec", "jpegd", "jpege")  # check_create_vnpu_param's order


class T(NamedTuple):
    """One DCMI template row (dcmi_computing_template): AI cores, memory MB, AI CPUs, media engines."""

    aic: int
    mem: int
    aicpu: int
    vpc: int = 0
    venc: int = 0
    vdec: int = 0
    jpegd: int = 0
    jpege: int = 0


# DCMI g_310p_24G_template / g_310p_48G_template (the 48G rows double the memory)
_310P = {"vir01": (1, 1, 1, 0, 1, 2, 1), "vir02": (2, 2, 3, 1, 3, 4, 2), "vir02_1c": (2, 1, 3, 0, 3, 4, 2),
         "vir04": (4, 4, 6, 2, 6, 8, 4), "vir04_3c": (4, 3, 6, 1, 6, 8, 4), "vir04_3c_ndvpp": (4, 3, 0, 0, 0, 0, 0),
         "vir04_4c_dvpp": (4, 4, 12, 3, 12, 16, 8)}


def _p310(mem_per_core: int) -> Dict[str, T]:
    return {n: T(a, mem_per_core * a, c, *m) for n, (a, c, *m) in _310P.items()}


TABLES: Dict[str, Dict[str, T]] = {
    "310P-24G": _p310(0xC00), "310P-48G": _p310(0x1800),
    # g_910_32G_template / g_910_16G_template (media not checked on 910: check_create_vnpu_param)
    "910-32G": {"vir02": T(2, 0x800, 1), "vir04": T(4, 0x1000, 1), "vir08": T(8, 0x2000, 3), "vir16": T(16, 0x4000, 7)},
    "910-16G": {"vir02": T(2, 0x400, 1), "vir04": T(4, 0x800, 1), "vir08": T(8, 0x1000, 3), "vir16": T(16, 0x2000, 7)},
    # g_910B_bin0_template (24 cores), bin1 (20 cores, 64 GB), bin2 (20 cores, 32 GB)
    "910B-bin0": {"vir12_3c_32g": T(12, 0x7800, 3, 5, 0, 1, 14, 2), "vir06_1c_16g": T(6, 0x3C00, 1, 2, 0, 0, 7, 1)},
    "910B-bin1": {"vir10_3c_32g": T(10, 0x7800, 3, 4, 0, 1, 12, 2), "vir05_1c_16g": T(5, 0x3C00, 1, 2, 0, 0, 6, 1)},
    "910B-bin2": {"vir10_3c_16g": T(10, 0x3800, 3, 4, 0, 1, 12, 2), "vir10_4c_16g_m": T(10, 0x3800, 4, 9, 0, 2, 24, 4),
                  "vir10_3c_16g_nm": T(10, 0x3800, 3), "vir05_1c_8g": T(5, 0x1C00, 1, 2, 0, 0, 6, 1)},
}


class Chip(NamedTuple):
    """A chip model as the stand-in knows it: its family, template table and totals (free when empty)."""

    family: str  # "310P", "910", "910B": npu_get_chip_type
    table: str
    total: T  # AI cores, memory MB, AI CPUs (-1: not queryable), media
    ids: int  # vNPU ids per chip: [phy*16+100, phy*16+100+ids) (MC: +107 inference, +115 training)


def chip_of(name: str, memory_mib: Optional[int]) -> Optional[Chip]:
    """The model of a chip called *name* (``310P3``, ``910B4``, ``910``), or None: no vNPU there."""
    if re.fullmatch(r"310P\d?", name):
        big = (memory_mib or 24576) > 24576
        return Chip("310P", "310P-48G" if big else "310P-24G", T(8, memory_mib or 24576, 7, 12, 3, 12, 16, 8), 8)
    if re.fullmatch(r"910B(1|2|2C)", name):
        return Chip("910B", "910B-bin0", _b_total(24, 6, "910B-bin0", "vir12_3c_32g", memory_mib), 16)
    if re.fullmatch(r"910B(3|4-1)", name):
        return Chip("910B", "910B-bin1", _b_total(20, 7, "910B-bin1", "vir10_3c_32g", memory_mib), 16)
    if name == "910B4":  # MC: ``_m`` = all the media engines, so the chip has vir10_4c_16g_m's
        m = TABLES["910B-bin2"]["vir10_4c_16g_m"]
        return Chip("910B", "910B-bin2", T(20, memory_mib or 32768, 7, *(getattr(m, k) for k in MEDIA)), 16)
    if re.fullmatch(r"910[A-Z]?", name):
        small = (memory_mib or 32768) <= 16384
        return Chip("910", "910-16G" if small else "910-32G", T(32, memory_mib or 32768, 14), 16)  # DCMI: 14 AICPU
    return None


def _b_total(aic: int, aicpu: int, table: str, half: str, memory_mib: Optional[int]) -> T:
    t = TABLES[table][half]  # media totals unknown: two halves' worth (the stand-in's assumption)
    return T(aic, memory_mib or 65536, aicpu, *(2 * getattr(t, m) for m in MEDIA))


class Refused(Exception):
    """The tool's lines and its exit status."""

    def __init__(self, lines: Sequence[str], status: int) -> None:
        super().__init__("\n".join(lines))
        self.lines, self.status = list(lines), status


def init_state(path: Path, chips: Sequence[Dict[str, Any]], major: int = 241, phy_column: bool = False) -> None:
    """A host's NPUs: each ``{"card": N, "chip": M, "name": "310P3", "memory_mib": 24576, "phy_id": P,
    "logic_id": L}`` (phy_id defaults to the chip's position, logic_id to its phy_id).  *phy_column*:
    ``info -m`` in the 910_93 layout, with a ``Chip Phy-ID`` column."""
    out = []
    for n, c in enumerate(chips):
        phy = c.get("phy_id", n)
        out.append({"card": c["card"], "chip": c["chip"], "name": c["name"], "phy_id": phy,
                    "logic_id": c.get("logic_id", phy), "memory_mib": c.get("memory_mib"), "vnpus": []})
    write_state(path, {"major": major, "mode": "docker", "cfg_recover": True, "chips": out,
                       "phy_column": phy_column})


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


def status_lines(message: str) -> List[str]:
    """npucli's success: ``printf("\\t%-30s : %s\\n", "Status", "OK")`` and the Message line alike."""
    return [f"\t{'Status':<30} : OK", f"\t{'Message':<30} : {message}"]


def find_chip(state: Dict[str, Any], card: int, chip: int) -> Dict[str, Any]:
    for c in state["chips"]:
        if c["card"] == card and c["chip"] == chip:
            return c
    # npu_check_card_id / npu_check_chip_id: INVALID_PARAMETER; the printing caller not found
    raise Refused([f"Error parameter of -i or -c: device {card} chip {chip} not found."], INVALID_PARAMETER)


def free(model: Chip, table: Dict[str, T], vnpus: List[Dict[str, Any]]) -> Dict[str, int]:
    """What DCMI's GET_FREE_RESOURCE would report: the totals less what each vNPU's template takes (how
    the driver counts a vir01's time-shared 2-core vGroup is not in the source: by its template, 1)."""
    left = dict(model.total._asdict())
    for v in vnpus:
        t = table[v["template"]]
        for k in left:
            left[k] -= getattr(t, k)
    return left


def groups(vnpus: List[Dict[str, Any]]) -> Dict[int, List[Dict[str, Any]]]:
    out: Dict[int, List[Dict[str, Any]]] = {}
    for v in vnpus:
        out.setdefault(v["vgroup"], []).append(v)
    return out


def check_budgets(model: Chip, need: T, left: Dict[str, int]) -> None:
    """npucli check_create_vnpu_param: AI cores, then AI CPUs (unless not queryable), then the media
    engines (310P and 910B only); each shortfall one line (two for DVPP), exit NOT_SUPPORT."""
    if need.aic > left["aic"]:
        raise Refused([f"Insufficient number of cores available, unallocated cores number:{float(left['aic']):f}."],
                      NOT_SUPPORT)
    if model.total.aicpu >= 0 and need.aicpu > left["aicpu"]:
        raise Refused([f"Insufficient number of AICPU available, unallocated AICPU number:{left['aicpu']}."],
                      NOT_SUPPORT)
    if model.family in ("310P", "910B") and any(getattr(need, m) > left[m] for m in MEDIA):
        raise Refused(["Insufficient number of DVPP available, unallocated DVPP number:",
                       ", ".join(f"{m.upper()}:{float(left[m]):f}" for m in MEDIA) + "."], NOT_SUPPORT)


def create(state: Dict[str, Any], dev_root: str, card: int, chip_id: int, template: str,
           vnpu_id: Optional[int], vgroup: Optional[int]) -> List[str]:
    """npucli set_chip_create_vdevice, in its order."""
    chip = find_chip(state, card, chip_id)
    model = chip_of(chip["name"], chip.get("memory_mib"))
    if model is None:  # set_chip_create_vdevice's chip-type switch: default
        raise Refused([], NOT_SUPPORT)
    table = TABLES[model.table]
    if template not in table:  # set_create_vdev_param -> check_vdev_template_param: INVALID_PARAMETER
        raise Refused(["Error parameter of -f"], INVALID_PARAMETER)
    if state["mode"] != "docker":  # check_vnpu_docker_mode + print_vnpu_mode_check_result, then NPU_OK
        return ["The vnpu is not in docker mode, does not support setting create-vnpu."]
    vnpus = chip["vnpus"]
    check_budgets(model, table[template], free(model, table, vnpus))
    # dcmi_create_vdevice: the driver's own checks; any failure prints one line (its code: unconfirmed)
    failed = Refused(["create vnpu failed."], INNER_ERR)
    first = chip["phy_id"] * 16 + 100  # MC: [phy_id*16+100, +107] inference, +115 training
    ids = range(first, first + model.ids)
    used = {v["id"] for c in state["chips"] for v in c["vnpus"]}
    if vnpu_id is None:
        vnpu_id = next((i for i in ids if i not in used), None)
    if vnpu_id is None or vnpu_id not in ids or vnpu_id in used:
        raise failed
    left = free(model, table, vnpus)
    if table[template].mem > left["mem"]:
        raise failed
    group = pick_group(model, table, vnpus, template, vgroup)
    if group is None:
        raise failed
    path = node_path(dev_root, vnpu_id)
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(state["major"], MINOR_BASE + vnpu_id))
    os.chmod(path, 0o666)  # mknod's mode goes through the umask
    vnpus.append({"id": vnpu_id, "template": template, "vgroup": group})
    return status_lines("Create vnpu success")


def pick_group(model: Chip, table: Dict[str, T], vnpus: List[Dict[str, Any]], template: str,
               vgroup: Optional[int]) -> Optional[int]:
    """MC: a 310P has at most 4 vGroups (-g 0..3); a vir01 shares a 2-core group with one other vir01.
    Other chips have no vGroups (-g refused)."""
    by_group = groups(vnpus)
    if model.family != "310P":
        return None if vgroup is not None else max(by_group, default=-1) + 1
    small = table[template].aic == 1
    joinable = [g for g, m in sorted(by_group.items()) if small and len(m) == 1 and m[0]["template"] == template]
    free_groups = [g for g in range(4) if g not in by_group]
    if vgroup is not None:
        return vgroup if vgroup in joinable or vgroup in free_groups else None
    return (joinable or free_groups or [None])[0]


def destroy(state: Dict[str, Any], dev_root: str, card: int, chip_id: int, vnpu_id: int) -> List[str]:
    """npucli set_chip_destroy_vdevice / _for_310P_910."""
    chip = find_chip(state, card, chip_id)
    if state["mode"] != "docker":
        return ["The vnpu is not in docker mode, does not support setting destroy-vnpu."]
    v = next((v for v in chip["vnpus"] if v["id"] == vnpu_id), None)
    if v is None:  # get_valid_vdev_id
        raise Refused(["Error parameter of -v."], INVALID_PARAMETER)
    if held_open(os.makedev(state["major"], MINOR_BASE + vnpu_id)):  # dcmi_set_destroy_vdevice fails (MC: in use)
        raise Refused([f"destroy vnpu {vnpu_id} failed."], INNER_ERR)
    try:
        node_path(dev_root, vnpu_id).unlink()
    except FileNotFoundError:
        pass
    chip["vnpus"].remove(v)
    return status_lines(f"Destroy vnpu {vnpu_id} success")


def info_vnpu(state: Dict[str, Any], card: int, chip_id: int) -> List[str]:
    """MC's figure of ``info -t info-vnpu``: free/total per resource, then a row per vNPU (AI CPUs and
    vGroups on the inference series only)."""
    chip = find_chip(state, card, chip_id)
    model = chip_of(chip["name"], chip.get("memory_mib"))
    if model is None:
        raise Refused([], NOT_SUPPORT)
    table, vnpus = TABLES[model.table], chip["vnpus"]
    inference = model.family == "310P"
    left, total = free(model, table, vnpus), model.total._asdict()
    bar = "+" + "-" * 79 + "+"

    def row(text: str) -> str:
        return f"| {text:<78}|"

    def cell(k: str, scale: int = 1) -> str:
        return f"{left[k] // scale}/{total[k] // scale}"

    media = [cell(m) if model.family != "910" else "NA/NA" for m in ("vpc", "venc", "vdec", "jpegd", "jpege")]
    cells = [cell("aic"), cell("mem", 1024), cell("aicpu") if inference else "NA/NA", *media, "NA/NA"]
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
    """``npu-smi info -m``: npucli print_mapping_info (``\\t%-30s`` columns: NPU ID, Chip ID, Chip Logic ID,
    then ``Ascend <name>``), or print_mapping_info_910_93 (a ``Chip Phy-ID`` column, the bare name);
    each card's MCU row after its chips, logic id ``-``."""
    phy = state.get("phy_column", False)
    heads = ["NPU ID", "Chip ID", "Chip Logic ID"] + (["Chip Phy-ID"] if phy else []) + ["Chip Name"]
    out = ["\t" + " ".join(f"{h:<30}" for h in heads)]
    for card in sorted({c["card"] for c in state["chips"]}):
        chips = sorted((c for c in state["chips"] if c["card"] == card), key=lambda c: c["chip"])
        for c in chips:
            ids = [c["card"], c["chip"], c["logic_id"]] + ([c["phy_id"]] if phy else [])
            name = c["name"] if phy else f"Ascend {c['name']}"
            out.append("\t" + " ".join(f"{i:<30}" for i in ids) + f" {name}")
        mcu = [str(card), str(len(chips)), "-"] + (["-"] if phy else []) + ["Mcu"]
        out.append("\t" + " ".join(f"{x:<30}" for x in mcu))
    return out


def phyid_remap(state: Dict[str, Any], phy: int) -> List[str]:
    """``info -t phyid-remap -p PHY``: npucli's printer (``\\t%-30s:%d``), non-V2 form."""
    c = next((c for c in state["chips"] if c["phy_id"] == phy), None)
    if c is None:  # dcmi_get_device_logicid_from_phyid fails: no line printed
        raise Refused([], INVALID_PARAMETER)
    return [f"\t{'Chip Physical ID':<30}:{phy}", f"\t{'Chip Logic ID':<30}:{c['logic_id']}",
            f"\t{'NPU ID':<30}:{c['card']}", f"\t{'Chip ID':<30}:{c['chip']}"]


def _args(argv: Sequence[str]) -> Dict[str, str]:
    """``-t create-vnpu -i 0 ...`` -> {"t": "create-vnpu", "i": "0", ...}; ``-m`` takes no value."""
    out: Dict[str, str] = {}
    it = iter(argv)
    for flag in it:
        if not (flag.startswith("-") and len(flag) == 2):
            raise Refused([f"Error parameter of {flag}"], INVALID_PARAMETER)
        if flag == "-m":
            out["m"] = ""
            continue
        value = next(it, None)
        if value is None:
            raise Refused([f"Error parameter of {flag}"], INVALID_PARAMETER)
        out[flag[1]] = value
    return out


def _int(args: Dict[str, str], key: str) -> int:
    try:
        return int(args[key])
    except (KeyError, ValueError):
        raise Refused([f"Error parameter of -{key}"], INVALID_PARAMETER) from None


def run(argv: Sequence[str]) -> List[str]:
    """The output lines of one call that exits 0.  Raises Refused."""
    if len(argv) < 1 or argv[0] not in ("info", "set"):
        raise Refused(["The stand-in knows only npu-smi info|set ... (its vNPU commands)"], INVALID_PARAMETER)
    verb, args = argv[0], _args(argv[1:])
    what = args.get("t", "")
    state_path = Path(os.environ.get("NPU_SMI_STATE", ""))
    if not state_path.name or not state_path.is_file():
        raise Refused(["NPU_SMI_STATE names no state file: the stand-in knows no NPU (support.npusmi.init_state)"],
                      INNER_ERR)
    dev_root = os.environ.get("NPU_SMI_DEV_ROOT", "/")
    with locked(state_path):
        state = json.loads(state_path.read_text())
        if verb == "info" and what == "info-vnpu":
            return info_vnpu(state, _int(args, "i"), _int(args, "c"))
        if verb == "info" and not what and args.get("m") is not None:
            return chip_map(state)
        if verb == "info" and what == "phyid-remap":
            return phyid_remap(state, _int(args, "p"))
        if verb == "info" and what == "vnpu-mode":
            return [f"vnpu-mode              : {state['mode']}"]
        if verb == "info" and what == "vnpu-cfg-recover":
            return [f"VNPU config recover mode : {'Enable' if state['cfg_recover'] else 'Disable'}"]
        if verb == "set" and what == "create-vnpu":
            if "f" not in args:  # set_chip_create_vdevice: check_vdev_template_param on an empty name
                raise Refused(["Must input parameter of -f."], INVALID_PARAMETER)
            given = _int(args, "v") if "v" in args else None
            out = create(state, dev_root, _int(args, "i"), _int(args, "c"), args["f"],
                         None if given == UNSPECIFIED else given, _int(args, "g") if "g" in args else None)
        elif verb == "set" and what == "destroy-vnpu":
            out = destroy(state, dev_root, _int(args, "i"), _int(args, "c"), _int(args, "v"))
        elif verb == "set" and what in ("vnpu-mode", "vnpu-cfg-recover"):
            d = args.get("d")
            if d not in ("0", "1"):
                raise Refused(["Error parameter of -d"], INVALID_PARAMETER)
            if what == "vnpu-mode":
                state["mode"] = "docker" if d == "0" else "VM"
                out = status_lines("The vnpu-mode is set successfully.")
            else:
                state["cfg_recover"] = d == "1"
                mode = "Enable" if d == "1" else "Disable"
                out = status_lines(f"The VNPU config recover mode {mode} is set successfully.")
        else:
            raise Refused([f"The stand-in does not implement npu-smi {verb} -t {what or '?'}"], INVALID_PARAMETER)
        write_state(state_path, state)
        return out


def main(argv: Sequence[str]) -> int:
    try:
        lines = run(argv)
    except Refused as err:
        if err.lines:
            print("\n".join(err.lines))
        return err.status
    gate = os.environ.get("NPU_SMI_CREATE_GATE")
    if gate and list(argv[:3]) == ["set", "-t", "create-vnpu"] and os.path.exists(gate) \
            and stat.S_ISFIFO(os.stat(gate).st_mode):
        with open(gate) as f:  # blocks until the test opens it for writing
            f.read()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
