"""The machine a `make bench` run happened on, for the report and the README."""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Dict


def _first(path: str, key: str) -> str:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip() if ":" in line else line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "?"


def _version(cmd: str) -> str:
    try:
        out = subprocess.run([cmd, "--version"], capture_output=True, text=True, timeout=10).stdout
    except OSError:
        return "absent"
    return out.splitlines()[0].split()[-1] if out else "?"


def _cgroups() -> str:
    unified = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    v1_devices = os.path.isdir("/sys/fs/cgroup/devices")
    if unified:
        return "cgroup v2"
    return "hybrid cgroups (v1 devices)" if v1_devices else "cgroup v1"


def describe() -> Dict[str, str]:
    """CPU, cores, memory, OS, kernel, Python, runc; and a one-line summary."""
    mem_kb = _first("/proc/meminfo", "MemTotal").split()[0]
    m = {
        "host": platform.node(),
        "cpu": _first("/proc/cpuinfo", "model name"),
        "cores": str(os.cpu_count()),
        "memory": f"{int(mem_kb) // (1 << 20)} GiB" if mem_kb.isdigit() else "?",
        "os": _first("/etc/os-release", "PRETTY_NAME="),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "runc": _version("runc"),
        "cgroups": _cgroups(),
    }
    m["summary"] = (f"{m['cores']} vCPU ({m['cpu']}), {m['memory']}, {m['os']}, kernel {m['kernel']}, "
                    f"Python {m['python']}, runc {m['runc']}, {m['cgroups']}")
    m["load_before"] = load()
    return m


def load() -> str:
    """The 1-minute load average: a busy machine makes every wall time longer."""
    return f"{os.getloadavg()[0]:.2f}"
