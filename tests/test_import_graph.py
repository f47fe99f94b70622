"""The package's import graph has no circles and goes one way, down the layers of
:data:`LAYERS` (docs/architecture.md).  Built from the source with ``ast`` (every
import statement, also those inside functions, and the commands ``cli.COMMANDS``
loads by name), so an edge hidden behind a function-level import or ``importlib``
fails here too."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import xpu_cdi
from xpu_cdi import cli

SRC = Path(xpu_cdi.__file__).resolve().parent

#: Highest first; a module may import its own layer and the ones below.  A name is a
#: module or a package (and everything in it); a subsystem's ``command`` module is
#: in the commands layer whatever its package (see :func:`layer_of`).
LAYERS: List[Tuple[str, Tuple[str, ...]]] = [
    ("commands", ("xpu_cdi.cli", "xpu_cdi.clikit")),
    ("subsystems", ("xpu_cdi.doctor", "xpu_cdi.deviceplugin", "xpu_cdi.dra", "xpu_cdi.exporter",
                    "xpu_cdi.runtime", "xpu_cdi.watch", "xpu_cdi.host", "xpu_cdi.system", "xpu_cdi.labels")),
    # remedy: the remediation policy the device plugin and the DRA driver share
    ("node", ("xpu_cdi.node", "xpu_cdi.kube", "xpu_cdi.remedy")),
    ("generate", ("xpu_cdi.generate", "xpu_cdi.nodeconfig")),
    # what generate, the node and doctor read of the host and of CDI: the sysfs PCIe tree
    # (generate's --with-topology annotations take it; it takes nothing of generate), the cards'
    # models, links and driver version, CDI names, the spec dirs' reader
    ("host", ("xpu_cdi.topology", "xpu_cdi.interconnect", "xpu_cdi.cardmodel", "xpu_cdi.driverversion",
              "xpu_cdi.cdi")),
    ("base", ("xpu_cdi", "xpu_cdi._version", "xpu_cdi._native", "xpu_cdi.model", "xpu_cdi.errors",
              "xpu_cdi.atomic", "xpu_cdi.bounded", "xpu_cdi.hostfs", "xpu_cdi.hoststat", "xpu_cdi.log",
              "xpu_cdi.schema_files", "xpu_cdi.binaries", "xpu_cdi.ranktable")),
]
#: (importer, imported) edges allowed against the layers, each with its reason: none.
EXEMPT: Dict[Tuple[str, str], str] = {}
#: The subsystems one subsystem may import, each with its reason: what the daemons (device
#: plugin, DRA driver, exporter, labeller) share with each other or with doctor lives in
#: ``node/`` or ``kube/``, never in a daemon's package.
SIBLINGS: Dict[Tuple[str, str], str] = {
    ("xpu_cdi.doctor", "xpu_cdi.runtime"): "doctor reads the runtimes' configs only through runtime's readers",
    ("xpu_cdi.host", "xpu_cdi.runtime"): "the host set-up wires containerd through runtime configure",
}


def modules() -> Dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = ("xpu_cdi",) + path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: Set[str]) -> Set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in known and m != name}


def graph() -> Dict[str, Set[str]]:
    mods = modules()
    edges = {name: imports_of(name, path, set(mods)) for name, path in mods.items()}
    edges["xpu_cdi.cli"] |= {module for module, _builder in cli.COMMANDS.values()}
    return edges


def cycle(edges: Dict[str, Set[str]]) -> List[str]:
    """One circle of *edges* (as a path that ends where it starts), or []."""
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def layer_of(module: str) -> Optional[int]:
    """The index in :data:`LAYERS` of *module* (the longest name that holds it), or None."""
    if module.endswith(".command"):
        return 0
    best: Optional[Tuple[int, int]] = None
    for rank, (_name, members) in enumerate(LAYERS):
        for m in members:
            if (module == m or module.startswith(m + ".")) and (best is None or len(m) > best[0]):
                best = (len(m), rank)
    return None if best is None else best[1]


def upward(edges: Dict[str, Set[str]]) -> List[str]:
    """Every edge from a lower layer to a higher one, as ``a (layer) -> b (layer)``."""
    out = []
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            la, lb = layer_of(a), layer_of(b)
            if la is not None and lb is not None and lb < la and (a, b) not in EXEMPT:
                out.append(f"{a} ({LAYERS[la][0]}) -> {b} ({LAYERS[lb][0]})")
    return out


def subsystem_of(module: str) -> Optional[str]:
    """The package of the subsystems layer that holds *module* (its ``command`` too), or None."""
    package = ".".join(module.split(".")[:2])
    return package if package in dict(LAYERS)["subsystems"] else None


def across(edges: Dict[str, Set[str]]) -> List[str]:
    """Every edge from one subsystem into another that :data:`SIBLINGS` does not list."""
    out = []
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            pa, pb = subsystem_of(a), subsystem_of(b)
            if a != "xpu_cdi.cli" and pb is not None and pa != pb and (pa or a, pb) not in SIBLINGS:
                out.append(f"{a} -> {b}")
    return out


def test_every_module_has_a_layer() -> None:
    assert sorted(m for m in modules() if layer_of(m) is None) == []


def test_layer_finder() -> None:
    assert layer_of("xpu_cdi.dra.command") == 0
    assert LAYERS[layer_of("xpu_cdi.dra.daemon")][0] == "subsystems"  # type: ignore[index]
    assert LAYERS[layer_of("xpu_cdi.node.inventory")][0] == "node"  # type: ignore[index]
    assert LAYERS[layer_of("xpu_cdi")][0] == "base"  # type: ignore[index]
    assert upward({"xpu_cdi.node.loop": {"xpu_cdi.deviceplugin.daemon"}}) == [
        "xpu_cdi.node.loop (node) -> xpu_cdi.deviceplugin.daemon (subsystems)"]
    assert upward({"xpu_cdi.deviceplugin.daemon": {"xpu_cdi.node.loop", "xpu_cdi.watch"}}) == []
    assert upward({"xpu_cdi.topology": {"xpu_cdi.generate.spec", "xpu_cdi.hostfs"}}) == [  # the knot of before
        "xpu_cdi.topology (host) -> xpu_cdi.generate.spec (generate)"]


def test_no_lower_layer_imports_a_higher_one() -> None:
    found = upward(graph())
    assert not found, "imports up the layers:\n" + "\n".join(found)


def test_no_subsystem_reaches_into_another() -> None:
    """The exporter, the labeller and doctor read what they share with the daemons from ``node/``
    and ``kube/``: none imports a daemon package (nor one daemon another's)."""
    found = across(graph())
    assert not found, "imports across subsystems (move what they share to node/ or kube/):\n" + "\n".join(found)


def test_across_finder() -> None:
    assert across({"xpu_cdi.exporter.holders": {"xpu_cdi.deviceplugin.sharing", "xpu_cdi.node.sharing"},
                   "xpu_cdi.doctor.claims": {"xpu_cdi.dra", "xpu_cdi.doctor.dra", "xpu_cdi.runtime.crio"},
                   "xpu_cdi.labels.command": {"xpu_cdi.dra.kube"}, "xpu_cdi.cli": {"xpu_cdi.dra.command"}}) == [
        "xpu_cdi.doctor.claims -> xpu_cdi.dra", "xpu_cdi.exporter.holders -> xpu_cdi.deviceplugin.sharing",
        "xpu_cdi.labels.command -> xpu_cdi.dra.kube"]


def test_siblings_are_still_needed() -> None:
    edges = graph()
    used = {(subsystem_of(a), subsystem_of(b)) for a, targets in edges.items() for b in targets}
    assert [pair for pair in SIBLINGS if pair not in used] == []


def test_exemptions_are_still_needed() -> None:
    edges = graph()
    assert [e for e in EXEMPT if e[1] not in edges.get(e[0], set())] == []


def test_graph_is_read_from_the_source() -> None:
    """The graph sees function-level and lazy imports (else the test below proves nothing)."""
    edges = graph()
    assert "xpu_cdi.doctor.command" in edges["xpu_cdi.cli"]  # lazy, through COMMANDS
    assert "xpu_cdi.clikit" in edges["xpu_cdi.doctor.command"]
    assert "xpu_cdi.deviceplugin.daemon" in edges["xpu_cdi.deviceplugin.command"]  # inside the function


def test_cycle_finder_finds_a_circle() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    found = cycle(graph())
    assert not found, "import circle: " + " -> ".join(found)


def test_lazy_imports_only_in_cli() -> None:
    """``importlib`` hides edges from readers: only cli's table of commands may use it."""
    users = sorted(name for name, path in modules().items()
                   if any(call in path.read_text() for call in ("import_module(", "__import__("))
                   and name != "xpu_cdi.cli")
    assert users == []


def test_every_command_lives_in_its_subsystem() -> None:
    """cli is only the table: each command is built by a module of the subsystem it serves
    (a ``command.py``, or binaries for ``hook``), and cli imports none of them directly."""
    mods = modules()
    for name, (module, builder) in cli.COMMANDS.items():
        assert module in mods, (name, module)
        assert module.endswith(".command") or module == "xpu_cdi.binaries", (name, module)
        assert callable(getattr(importlib.import_module(module), builder)), (name, builder)
    assert graph()["xpu_cdi.cli"] - {m for m, _b in cli.COMMANDS.values()} == {"xpu_cdi.clikit"}
