"""JSON schemas shipped with xpu-cdi (profile and CDI spec)."""
