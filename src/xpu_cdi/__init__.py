"""xpu-cdi: CDI specs, an OCI hook and a wrapper runtime for AI accelerators.

Two data flows carry everything:

* generate: ``generate.profile -> generate.discover -> hoststat (C) ->
  generate.edits -> generate.spec -> generate.write`` (atomic);
* container start: the compiled ``xpu-cdi-hook`` and ``xpu-container-runtime``
  (``_native/``, C) read the specs and hook indexes ``generate`` wrote;
  no Python runs there.  The rest of the package is tooling around them
  (doctor, topology, runtime configure, watch, the device plugin).
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from ._version import VERSION

        return VERSION
    raise AttributeError(f"module 'xpu_cdi' has no attribute {name!r}")
