"""``xpu-cdi doctor``: check the whole chain from driver to RuntimeClass.

Each module holds one group of checks; a check returns results of the shape
``{"check", "status", "found", "fix"}`` (:mod:`.result`).  The groups follow
the failures seen in the field: no cards (driver), a Running pod without
``/dev/xpu0`` (specs, runtime config, hook, RuntimeClass), ``libxpu*.so``
not found and permission denied (driver files, node modes), slow multi-card
jobs (topology).
"""
