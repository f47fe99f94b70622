"""``xpu-cdi exporter``: per-card Prometheus metrics with the pod holding each card (docs/monitoring.md)."""
