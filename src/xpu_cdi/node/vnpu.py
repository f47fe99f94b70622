"""The vendor's partitioning tool (Ascend ``npu-smi``), as the DRA driver and the device plugin run it.

The tool's path is the driver's setting (``--vnpu-tool``), never anything a claim or a pod
says; it runs with a fixed environment (the driver's library dirs) and a timeout.  Commands
(docs/vendors.md, "Ascend vNPU templates"):

* ``npu-smi info -m``: which card and chip each NPU is (:func:`parse_chip_map`), and
  ``npu-smi info -t phyid-remap -p PHY`` for the card and chip of ``/dev/davinci<PHY>`` where
  ``info -m`` gives no phy id: the vendor keeps logic and phy ids apart, and a vNPU's id range
  follows the phy id;
* ``npu-smi set -t create-vnpu -i CARD -c CHIP -f TEMPLATE -v ID``: the id is the driver's
  choice (the vendor allows it), so the checkpoint names the vNPU before it exists and a
  restart can destroy it whatever happened in between;
* ``npu-smi set -t destroy-vnpu -i CARD -c CHIP -v ID``.

A ``set`` succeeds only with exit 0 and a ``Status : OK`` line (npu-smi prints it on success
alone); anything else is a refusal in the tool's own words: npu-smi answers a shortfall, a bad
parameter or a driver failure with one line and no Status (``Insufficient number of AICPU
available, ...``, exit 217), and in VM vnpu-mode with one line and exit 0.  The vNPU's node is
``/dev/vdavinci<ID>`` (``/dev/davinci<ID>`` in the container).
"""

from __future__ import annotations

import os
import re
import subprocess
import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Sequence, Tuple

from ..errors import ClaimError
from ..generate import edits
from ..hostfs import host_path
from ..model import DeviceNode, NodeInfo

TIMEOUT = 60
_VNPU_ROW = re.compile(r"^\|\s*([0-9]+)\s*\|.*\|\s*(\S+)\s*\|?\s*$")  # | id | vgroup | container | status | template
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "LD_LIBRARY_PATH": "/usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64/common:"
                          "/usr/local/Ascend/driver/lib64/driver"}


@dataclass(frozen=True)
class ToolChip:
    """One chip as the vendor's tool numbers it (``npu-smi -i CARD -c CHIP``), with its name (``310P3``)."""

    card: int
    chip: int
    phy: int
    name: str


def node_path(vnpu_id: int) -> str:
    """The host's node of a vNPU."""
    return f"/dev/vdavinci{vnpu_id}"


def container_path(vnpu_id: int) -> str:
    """What the container calls it (mind-cluster ``getDevPath``: the CANN runtime opens davinci<id>)."""
    return f"/dev/davinci{vnpu_id}"


class Tool:
    """``npu-smi`` at *path*."""

    def __init__(self, path: str, dev_root: str = "/", timeout: float = TIMEOUT) -> None:
        self.path, self.dev_root, self.timeout = path, dev_root, timeout

    def run(self, args: Sequence[str]) -> List[str]:
        """The output lines of a successful call (a ``set`` only with ``Status : OK``).  Raises ClaimError:
        the command and the tool's own lines, with its exit status."""
        argv = [self.path, *args]
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=ENV,
                               timeout=self.timeout, errors="replace")
        except FileNotFoundError:
            raise ClaimError(f"{self.path} is not there: give the vendor's tool with --vnpu-tool") from None
        except subprocess.TimeoutExpired:
            raise ClaimError(f"{' '.join(argv)} did not finish in {self.timeout:.0f}s") from None
        except OSError as err:
            raise ClaimError(f"{self.path} cannot run: {err.strerror}") from None
        lines = r.stdout.splitlines()
        said = {" ".join(k.split()): v.strip() for k, _s, v in (ln.partition(":") for ln in lines) if _s}
        if r.returncode == 0 and (list(args[:1]) != ["set"] or said.get("Status") == "OK"):
            return lines
        words = " ".join(ln.strip() for ln in (r.stdout.strip() or r.stderr.strip()).splitlines() if ln.strip())
        raise ClaimError(f"{' '.join(argv)}: {words or 'no output'} (exit status {r.returncode})")

    def chips(self, phys: Iterable[int] = ()) -> Dict[int, ToolChip]:
        """The NPU chips by phy id (the N of ``/dev/davinciN``): ``info -m``'s Chip Phy-ID column where it
        has one, else ``info -t phyid-remap`` for each of *phys*; with neither, by logic id."""
        table, by_phy = parse_chip_map("\n".join(self.run(["info", "-m"])))
        phys = sorted(set(phys))
        if by_phy or not phys:
            return table
        by_place = {(c.card, c.chip): c for c in table.values()}
        out: Dict[int, ToolChip] = {}
        for phy in phys:
            lines = self.run(["info", "-t", "phyid-remap", "-p", str(phy)])
            try:
                place = parse_phyid_remap("\n".join(lines))
            except (KeyError, ValueError):
                raise ClaimError(f"{self.path} info -t phyid-remap -p {phy} named no card and chip: "
                                 f"{' '.join(ln.strip() for ln in lines)[:200]!r}") from None
            if place in by_place:
                out[phy] = dataclasses.replace(by_place[place], phy=phy)
        return out

    def vnpus(self, card: int, chip: int) -> List[Tuple[int, str]]:
        """``(vNPU id, template)`` of each vNPU ``info -t info-vnpu -i CARD -c CHIP`` lists."""
        return parse_info_vnpu(self.run(["info", "-t", "info-vnpu", "-i", str(card), "-c", str(chip)]))

    def create(self, card: int, chip: int, template: str, vnpu_id: int) -> str:
        """Make the vNPU; its node's host path (under the dev root)."""
        self.run(["set", "-t", "create-vnpu", "-i", str(card), "-c", str(chip), "-f", template, "-v", str(vnpu_id)])
        path = host_path(self.dev_root, node_path(vnpu_id))
        if not os.path.exists(path):
            raise ClaimError(f"npu-smi made vNPU {vnpu_id}, but {node_path(vnpu_id)} is not there")
        return path

    def destroy(self, card: int, chip: int, vnpu_id: int) -> None:
        """Destroy the vNPU; one that is not there (its node gone) is no error."""
        try:
            self.run(["set", "-t", "destroy-vnpu", "-i", str(card), "-c", str(chip), "-v", str(vnpu_id)])
        except ClaimError:
            if os.path.exists(host_path(self.dev_root, node_path(vnpu_id))):
                raise

    def exists(self, vnpu_id: int) -> bool:
        return os.path.exists(host_path(self.dev_root, node_path(vnpu_id)))


def parse_info_vnpu(lines: Sequence[str]) -> List[Tuple[int, str]]:
    """``(vNPU id, template)`` of each row of ``npu-smi info -t info-vnpu`` (the rows below its "Vnpu ID" header)."""
    out, rows = [], False
    for ln in lines:
        if "Vnpu ID" in ln:
            rows = True
        elif rows:
            m = _VNPU_ROW.match(ln.strip())
            if m:
                out.append((int(m.group(1)), m.group(2)))
    return out


def node_edits(host: str, vnpu_id: int) -> Dict[str, Any]:
    """The containerEdits of a vNPU whose node is *host*: that node as ``/dev/davinci<id>``, owner and mode
    as on the host."""
    st = os.stat(host)
    info = NodeInfo(host, "c", os.major(st.st_rdev), os.minor(st.st_rdev), st.st_mode & 0o7777, st.st_uid, st.st_gid)
    return {"deviceNodes": [edits.device_node(DeviceNode(container_path(vnpu_id), info))]}


def parse_chip_map(text: str) -> Tuple[Dict[int, ToolChip], bool]:
    """``npu-smi info -m`` -> (chips, whether they are keyed by phy id).

    npu-smi prints (its ``print_mapping_info``) ``NPU ID  Chip ID  Chip Logic ID  Chip Name`` with the
    name as ``Ascend 310P3``; the 910_93 form (``print_mapping_info_910_93``) adds ``Chip Phy-ID``
    before the bare name.  With that column the chips are keyed by phy id, else by logic id (their
    ``phy`` then the logic id, until :meth:`Tool.chips` learns the phy id).  Rows whose ids are
    not numbers (each card's ``Mcu``, logic id ``-``) are no NPU chips.
    """
    by_phy = "Chip Phy-ID" in text
    ids = 4 if by_phy else 3
    out: Dict[int, ToolChip] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) > ids and all(x.isdigit() for x in f[:ids]):
            name = " ".join(f[ids:])
            name = name[len("Ascend"):].strip() if name.startswith("Ascend") else name
            key = int(f[ids - 1])
            out[key] = ToolChip(int(f[0]), int(f[1]), key, name)
    return out, by_phy


def parse_phyid_remap(text: str) -> Tuple[int, int]:
    """``npu-smi info -t phyid-remap -p PHY`` (``NPU ID :c``, ``Chip ID :d`` lines among others) -> (card, chip).
    Raises ValueError: either line missing or not a number."""
    got = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        if sep:
            got[" ".join(label.split())] = value.strip()
    return int(got["NPU ID"]), int(got["Chip ID"])
