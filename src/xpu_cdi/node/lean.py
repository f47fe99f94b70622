"""What a node daemon does not need to hold (issue 30): OpenSSL, and what its start freed.

grpcio's extension imports asyncio as it loads (for ``grpc.aio``), asyncio
imports ``ssl``, and ``ssl`` and ``_hashlib`` (hashlib's accelerator) map
OpenSSL's libcrypto: about 4 MiB of resident memory in the device plugin,
whose sockets (kubelet's, unix) carry no TLS and which hashes a few short
strings.  asyncio takes an ImportError of ``ssl`` as "no TLS here", hashlib
one of ``_hashlib`` as "use the built-in sha256" (the same digests).  The
exporter too (kubelet's PodResources socket is a unix socket; ~2.4 MiB of
it on Debian's packages, whose grpc links libcrypto all the same); not the
DRA driver (its API client speaks TLS).

pyudev finds libudev with ``ctypes.util``, which imports ``shutil``, which
imports ``bz2`` and ``lzma`` for archives no daemon makes: their modules,
libbz2 and liblzma are ~0.3 MiB of every daemon.  shutil takes an
ImportError of their accelerators as "no such archive format here".
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
from typing import Iterator, Sequence

OPENSSL_MODULES = ("ssl", "_ssl", "_hashlib")
ARCHIVE_MODULES = ("_bz2", "_lzma")


@contextlib.contextmanager
def without(modules: Sequence[str]) -> Iterator[None]:
    """Imports inside see none of *modules* (those not loaded yet: a test process may have them);
    afterwards importing them works again for whoever asks."""
    blocked = [m for m in modules if m not in sys.modules]
    for m in blocked:
        sys.modules[m] = None  # type: ignore[assignment]  # `import m` raises ImportError
    try:
        yield
    finally:
        for m in blocked:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]


@contextlib.contextmanager
def without_openssl() -> Iterator[None]:
    """Imports inside see none of :data:`OPENSSL_MODULES`."""
    with without(OPENSSL_MODULES):
        import hashlib  # noqa: F401 - first loaded here, it keeps its built-in hashes for good

        yield


def settle() -> None:
    """Once a daemon has started (its first pass done): the cycles of the start collected, what
    stays (modules, profiles) frozen out of every later full collection, and the free pages inside
    glibc's heap given back (``free()`` gives back only its top; ~0.2-0.3 MiB here)."""
    gc.collect()
    gc.freeze()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim this way
        return
    trim(0)
