"""The `make bench` figure: generate scaling, hook and wrapper overhead distributions.

matplotlib is an optional extra (`bench`); when this venv lacks it, it is
installed with pip on first use.  No plot (and a note) when that fails.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence


def _matplotlib() -> Optional[object]:
    try:
        return importlib.import_module("matplotlib")
    except ImportError:
        print("bench: installing matplotlib into this venv for the plot", file=sys.stderr)
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "matplotlib"], capture_output=True,
                           text=True)
        if r.returncode != 0:
            print(f"bench: no plot, matplotlib could not be installed: {r.stderr.strip()[-300:]}", file=sys.stderr)
            return None
        importlib.invalidate_caches()
        return importlib.import_module("matplotlib")


def _paired(s: Dict[str, List[float]], a: str, b: str) -> List[float]:
    return [(x - y) * 1e3 for x, y in zip(s[a], s[b])]


def plot(s: Dict[str, List[float]], sizes: Sequence[int], path: Path, title: str) -> Optional[Path]:
    """Write the PNG to *path*; return it, or None without matplotlib."""
    mpl = _matplotlib()
    if mpl is None:
        return None
    mpl.use("Agg")  # type: ignore[attr-defined]
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2))
    runs = [[v * 1e3 for v in s[f"generate/{n}"]] for n in sizes]
    left.boxplot(runs, positions=list(sizes), widths=[max(30, n * 0.06) for n in sizes], manage_ticks=False)
    meds = [sorted(r)[len(r) // 2] for r in runs]
    left.plot(sizes, meds, "o-", label="median")
    left.set_xlabel("devices in the spec")
    left.set_ylabel("xpu-cdi generate, whole process (ms)")
    left.set_title("generate scaling")
    left.grid(alpha=0.3)
    left.legend()
    pairs = [("hook 8 cards", "hook/inject8", "hook/true"), ("hook, nothing asked", "hook/noop", "hook/true"),
             ("wrapper 8 cards", "wrapper/fast8", "wrapper/runc8"),
             ("wrapper, nothing", "wrapper/fast0", "wrapper/runc")]
    present = [(label, _paired(s, a, b)) for label, a, b in pairs if a in s and b in s]
    if present:
        right.violinplot([d for _, d in present], showmedians=True)
        right.set_xticks(range(1, len(present) + 1), [label for label, _ in present], rotation=15)
        right.axhline(10, color="red", linestyle="--", linewidth=1, label="hook target 10 ms")
        right.legend()
    right.set_ylabel("per-round overhead on runc run (ms)")
    right.set_title("hook and wrapper overhead (paired, same round)")
    right.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
