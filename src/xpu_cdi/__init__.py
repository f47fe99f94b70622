"""xpu-cdi: CDI specs, an OCI hook and a wrapper runtime for AI accelerators.

Two data flows carry everything:

* generate: ``generate.profile -> generate.discover -> resolver (C) ->
  generate.edits -> generate.spec -> generate.write`` (atomic);
* hook: ``hook.state (OCI state, config.json) -> hook.select ->
  cdi.registry (spec dirs) -> hook.inject``; the wrapper runtime
  (``runtime.wrapper``) applies the same edits to ``config.json`` instead.

This module deliberately imports nothing: it runs before every submodule,
including the hook, whose start-up time is measured.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from ._version import VERSION

        return VERSION
    raise AttributeError(f"module 'xpu_cdi' has no attribute {name!r}")
