"""Helpers of the test suite: fake hosts, real runtimes, kubelet and CRI stubs (loaded by
tests/conftest.py; importable as ``support`` through pyproject's pytest ``pythonpath``)."""
