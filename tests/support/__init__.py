"""Helpers of the test suite: fake hosts, real runtimes, kubelet and CRI stubs (loaded by
tests/conftest.py; importable as ``support`` through pyproject's pytest ``pythonpath``)."""

#: How long a wait on an event may take before it counts as a hang: a bound, never a measure
#: (a loaded CI machine is slow; a test that states a latency asserts it apart).
HANG = 60.0
