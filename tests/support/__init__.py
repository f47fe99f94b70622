"""Helpers of the test suite: fake hosts, real runtimes, kubelet and CRI stubs (loaded by
tests/conftest.py; importable as ``support`` through pyproject's pytest ``pythonpath``)."""

#: How long a wait on an event may take before it counts as a hang: a bound, never a measure
#: (a loaded CI machine is slow; a test that states a latency asserts it apart).
HANG = 60.0

#: Set for the whole run (tests/conftest.py) and in every clean environment a test builds: a
#: package build step a test reaches (scripts/install-deps.sh) only checks that `make deps`
#: installed what it needs, and fails naming it; the suite never runs apt itself.
DEPS_CHECK = {"XPU_CDI_DEPS_CHECK": "1"}
