"""What DRA claims leave on the node beyond whole cards, and chips handed out two ways.

* ``dra-claim-specs``: every claim-scoped CDI spec (:mod:`xpu_cdi.node.claimspec`, one file per
  prepared claim: a share of a card, a vNPU) must belong to a claim its driver's checkpoint
  holds on this boot; one that does not is litter of a claim that is gone (the driver removes
  such files when it starts).
* ``whole-and-partitioned``: no chip may be offered whole while a vNPU carved from it is offered
  too (by the device plugin or the DRA driver, read from their status files): two pods could
  then be given the same chip (the loop withholds such a chip, :mod:`xpu_cdi.node.carved`: this
  names a daemon that does not).  Which chip a vNPU is carved from is the vendor's id layout
  (:meth:`xpu_cdi.partitions.Partitions.vnpu_parent`, docs/vendors.md).
* ``vnpu-held``: every vNPU the vendor's tool lists (``npu-smi info -t info-vnpu`` per chip of
  ``npu-smi info -m``) is held by a claim (the DRA driver's checkpoint) or offered by a daemon
  (an admin's static vNPU); one that is neither is left over from a claim that is gone.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Set, Tuple

from .. import partitions
from ..cdi import registry
from ..node import checkpoint as _cp
from ..node import claimspec
from ..node.prepared import PreparedClaims
from ..node.vnpu import Tool
from ..errors import ClaimError
from ..generate.discover import host_path
from ..node import status as _status
from ..node.inventory import node_refs
from .context import Context
from .dra import running
from .result import Result, fail, ok, warn

_CHIP = re.compile(r"/dev/davinci([0-9]+)$")  # host paths: under --dev-root too
_VNPU = re.compile(r"/dev/vdavinci([0-9]+)$")


def _spec_files(spec_dirs: Tuple[str, ...]) -> List[Tuple[str, str, str]]:
    """``(driver, claim uid, path)`` of every claim-scoped spec in *spec_dirs*."""
    out = []
    for d in spec_dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        drivers = {n[len(claimspec.PREFIX):].partition("_")[0] for n in names if n.startswith(claimspec.PREFIX)}
        for driver in sorted(drivers):
            out += [(driver, uid, path) for uid, path in sorted(claimspec.listed(d, driver).items())]
    return out


def check_claim_specs(ctx: Context) -> List[Result]:
    """dra-claim-specs: each claim-scoped spec belongs to a claim its driver has prepared."""
    files = _spec_files(ctx.opts.spec_dirs)
    if not files:
        return [ok("dra-claim-specs", "no claim-scoped CDI spec (no share or vNPU prepared)")]
    docs, _stale = running(ctx.opts.dra_run_dir)
    held: Dict[str, Set[str]] = {}  # driver -> claim uids its checkpoint holds on the driver's boot
    for doc in docs:
        for st in doc["kinds"].values():
            try:
                claims, boot = _cp.read(str(st.get("checkpoint") or ""))
            except (OSError, ValueError):
                claims, boot = {}, ""
            uids = held.setdefault(str(st.get("driver")), set())
            if boot == doc.get("boot_id"):
                uids.update(claims)
    out = []
    for driver, uid, path in files:
        if driver not in held:
            out.append(warn("dra-claim-specs", f"{path}: claim {uid} of driver {driver}, which is not running: "
                                               f"nothing tells whether the claim still exists",
                            "start the driver (it removes the specs of claims it has not prepared), or delete the "
                            "file once no pod uses the claim"))
        elif uid not in held[driver]:
            out.append(fail("dra-claim-specs", f"{path}: claim {uid} is not prepared by {driver} (the claim is "
                                               f"gone): its devices still resolve for any container naming them",
                            f"delete {path}, or restart the driver (it removes such files when it starts)"))
    if not out:
        out.append(ok("dra-claim-specs", f"{len(files)} claim-scoped spec(s), each of a claim its driver prepared"))
    return out


def _offered(ctx: Context) -> List[Tuple[str, str]]:
    """``(who, qualified CDI name)`` of every device the device plugin and the DRA driver offer now."""
    out = []
    for doc in running(ctx.opts.dra_run_dir)[0]:
        out += [("the DRA driver", str(c)) for st in doc["kinds"].values() for c in (st.get("devices") or {}).values()]
    plugin, _why = _status.read(ctx.opts.plugin_status_file)
    if plugin is not None and _status.alive(plugin):
        for unit, st in (plugin.get("kinds") or {}).items():
            kind = str(st.get("kind") or unit)
            out += [("the device plugin", f"{kind}={card}") for card in st.get("devices") or []]
    return out


def check_partitioned(ctx: Context) -> List[Result]:
    """whole-and-partitioned: no chip offered whole while a vNPU of it is offered."""
    parts = partitions.builtin("ascend")
    offered = _offered(ctx)
    if parts is None or not offered:
        return [ok("whole-and-partitioned", "no device offered (neither the device plugin nor the DRA driver "
                                            "runs)")]
    reg = registry.load(ctx.opts.spec_dirs)
    chips: Dict[int, str] = {}  # physical id -> who offers it whole, as what
    vnpus: List[Tuple[int, str]] = []
    for who, name in offered:
        dev = reg.devices.get(name)
        for node in node_refs(dev.edits) if dev is not None else ():
            chip, vnpu = _CHIP.search(node.path), _VNPU.search(node.path)
            if chip:
                chips[int(chip.group(1))] = f"{name} by {who}"
            elif vnpu:
                vnpus.append((int(vnpu.group(1)), f"{name} by {who}"))
    out = []
    for vnpu, what in vnpus:
        phy = parts.vnpu_parent(vnpu)
        if phy is not None and phy in chips:
            out.append(fail("whole-and-partitioned", f"chip {phy} is offered whole ({chips[phy]}) and partitioned "
                                                     f"(vNPU {vnpu}, {what}): two pods can be given the same chip",
                            f"hand the chip out one way: destroy its vNPUs (npu-smi set -t destroy-vnpu -i CARD "
                            f"-c CHIP -v {vnpu}) or leave it out of the whole cards, then restart the daemons"))
    return out or [ok("whole-and-partitioned", f"{len(chips)} chip(s) offered whole, {len(vnpus)} vNPU(s); none "
                                                f"of a chip offered whole")]


def check_vnpus(ctx: Context) -> List[Result]:
    """vnpu-held: each vNPU on the host is held by a claim or offered by a daemon."""
    parts = partitions.builtin("ascend")
    if parts is None or not any(p.name == parts.profile for p in ctx.candidates):
        return []
    tool = Tool(host_path(ctx.opts.roots.driver, f"/usr/local/bin/{parts.tool}"), ctx.opts.roots.dev, timeout=20)
    if not os.path.exists(tool.path):
        return [ok("vnpu-held", f"no {parts.tool} at {tool.path}: no vNPU to judge")]
    offered = _offered(ctx)
    docs = running(ctx.opts.dra_run_dir)[0]
    if not offered and not docs:
        return [ok("vnpu-held", "neither the device plugin nor the DRA driver runs: vNPUs not judged")]
    held: Dict[int, str] = {}
    for doc in docs:
        for st in doc["kinds"].values():
            try:
                held.update({v: f"claim {uid}" for v, uid in PreparedClaims(
                    "", _cp.read(str(st.get("checkpoint") or ""))[0]).vnpu_ids().items()})
            except (OSError, ValueError):
                pass
    reg = registry.load(ctx.opts.spec_dirs)
    for who, name in offered:
        dev = reg.devices.get(name)
        for node in node_refs(dev.edits) if dev is not None else ():
            m = _VNPU.search(node.path)
            if m:
                held.setdefault(int(m.group(1)), f"offered as {name} by {who}")
    out = []
    try:
        chips = tool.chips()
        for chip in sorted(chips.values(), key=lambda c: (c.card, c.chip)):
            for vnpu_id, template in tool.vnpus(chip.card, chip.chip):
                if vnpu_id not in held:
                    out.append(fail("vnpu-held", f"vNPU {vnpu_id} ({template}) on card {chip.card} chip "
                                                 f"{chip.chip} is held by no claim and offered by no daemon",
                                    f"once no process uses it: {parts.tool} set -t destroy-vnpu -i {chip.card} -c "
                                    f"{chip.chip} -v {vnpu_id}"))
    except ClaimError as err:
        return [warn("vnpu-held", f"{parts.tool} did not answer: {err}", "check the driver is loaded (npu-smi info)")]
    return out or [ok("vnpu-held", f"every vNPU {parts.tool} lists is held by a claim or offered ({len(held)} known)")]
