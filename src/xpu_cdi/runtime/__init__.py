"""Runtime integration: ``xpu-cdi runtime configure`` wires the compiled
``xpu-container-runtime`` wrapper and the hook into containerd, CRI-O,
Docker and podman."""
