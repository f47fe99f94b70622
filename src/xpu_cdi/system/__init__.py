"""``xpu-cdi system``: host set-up the runtimes rely on (:mod:`.devchar`: the ``/dev/char``
links of the accelerator nodes)."""
