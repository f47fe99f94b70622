"""cffi build script (out-of-line API mode) of ``_hoststat``, the host
device-node facts the Python tooling reads (hoststat.c, declared in
hoststat.cdef).  The binaries a container start runs are built apart
(``hotpath/``, ``build_bin.py``) and share nothing with this extension."""

from __future__ import annotations

from pathlib import Path

from cffi import FFI

HERE = Path(__file__).parent
ffibuilder = FFI()
ffibuilder.cdef((HERE / "hoststat.cdef").read_text())
ffibuilder.set_source(
    "xpu_cdi._native._hoststat",
    (HERE / "hoststat.c").read_text(),
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-std=gnu11", "-pthread"],
    extra_link_args=["-pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
