"""cffi build script (out-of-line API mode): C lives in real .c/.cdef files."""

from __future__ import annotations

from pathlib import Path

from cffi import FFI

HERE = Path(__file__).parent
ffibuilder = FFI()
ffibuilder.cdef((HERE / "resolver.cdef").read_text() + (HERE / "hook.cdef").read_text())
ffibuilder.set_source(
    "xpu_cdi._native._resolver",
    # the OCI hook's syscalls (hook.cdef) are the binaries' kernel/ layer,
    # compiled into this extension too until the Python hook is gone
    (HERE / "resolver.c").read_text()
    + "\n".join(f'#include "kernel/{h}.h"' for h in ("ns", "inroot", "spawn", "bpf_dev")) + "\n",
    sources=[str(HERE / "hotpath" / "kernel" / f) for f in ("ns.c", "inroot.c", "spawn.c", "bpf_dev.c")],
    include_dirs=[str(HERE / "hotpath")],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-std=gnu11", "-pthread"],
    extra_link_args=["-pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
