"""The package version (kept in step with pyproject.toml by a test)."""

VERSION = "0.1.0"
