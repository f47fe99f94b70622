"""cffi build script (out-of-line API mode): C lives in real .c/.cdef files."""

from __future__ import annotations

from pathlib import Path

from cffi import FFI

HERE = Path(__file__).parent
ffibuilder = FFI()
ffibuilder.cdef((HERE / "resolver.cdef").read_text())
ffibuilder.set_source(
    "xpu_cdi._native._resolver",
    (HERE / "resolver.c").read_text(),
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-std=gnu11"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
