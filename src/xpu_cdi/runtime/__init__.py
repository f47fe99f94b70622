"""Runtime integration: ``xpu-cdi runtime configure`` and the
``xpu-container-runtime`` wrapper.

The wrapper's hot path (``wrapper``, ``ociedit``) imports only the standard
library, ``errors``, ``atomic``, ``cdi.registry``, ``cdi.names`` and
``hook.select``; this package module imports nothing so that it stays so.
"""
