"""What a daemon process imported, from its own ``-X importtime`` lines (``PYTHONPROFILEIMPORTTIME=1``
in its environment, its stderr in the log a test reads): every module of its whole run, the lazy
imports of its passes included, without changing how it is started."""

from __future__ import annotations

import os
import subprocess
from typing import Dict, Iterable, List, Optional, Set

ENV = {"PYTHONPROFILEIMPORTTIME": "1"}

#: what no node daemon needs on its path: validation, archives and the temporary-file machinery
#: (importlib.resources), pathlib (urllib.parse and ipaddress with it), other clusters' clients,
#: the idna codec (a resolver's answer decoded: http.server's getfqdn at bind)
NOT_IN_DAEMONS = {"jsonschema", "importlib.resources", "zipfile", "pathlib", "kubernetes", "tomlkit",
                  "encodings.idna"}
#: the YAML parser: only the DRA driver's kubeconfig needs it (profiles and templates come from JSON)
YAML = {"yaml"}


def imported(log_text: str) -> Set[str]:
    """The module names in the ``import time:`` lines of *log_text*."""
    out = set()
    for line in log_text.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                out.add(name)
    return out


def at_start(python: str, env: Optional[Dict[str, str]] = None) -> Set[str]:
    """What *python* imports before it runs a line (``site``; the dev venv's editable-install finder
    takes pathlib): not the daemon's."""
    r = subprocess.run([python, "-c", "pass"], env=dict(env if env is not None else os.environ, **ENV),
                       capture_output=True, text=True, timeout=60, check=True)
    return imported(r.stderr)


def loaded(mods: Set[str], names: Iterable[str]) -> List[str]:
    """Which of *names* (a package stands for its submodules too) are among *mods*."""
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in mods))
