"""One error hierarchy: every exception class of the package is defined in errors.py and
derives from XpuCdiError (so clikit's one table maps it to an exit code and one line)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import List

import xpu_cdi
from xpu_cdi import clikit, errors

SRC = Path(xpu_cdi.__file__).resolve().parent


def exception_classes_outside_errors(src: Path = SRC) -> List[str]:
    """``module:Class`` of every class outside errors.py whose base names an error or exception."""
    out = []
    for path in sorted(src.rglob("*.py")):
        if path.name == "errors.py" and path.parent == src:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                if any(b.endswith(("Error", "Exception")) for b in bases):
                    out.append(f"{path.relative_to(src)}:{node.name}({', '.join(bases)})")
    return out


def test_finder_sees_a_class(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("class A:\n    pass\n\n\nclass BadError(ValueError):\n    pass\n")
    assert exception_classes_outside_errors(tmp_path) == ["m.py:BadError(ValueError)"]


def test_error_classes_live_in_errors_py() -> None:
    assert exception_classes_outside_errors() == []


def test_every_class_of_errors_py_is_in_the_hierarchy() -> None:
    classes = [c for _n, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(classes) > 10
    assert all(issubclass(c, errors.XpuCdiError) for c in classes)
    assert clikit.exit_code(errors.ClaimError("x")) == 1 and clikit.exit_code(errors.SpecError("x")) == 5
