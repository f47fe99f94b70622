"""cffi build script (out-of-line API mode): C lives in real .c/.cdef files."""

from __future__ import annotations

from pathlib import Path

from cffi import FFI

HERE = Path(__file__).parent
ffibuilder = FFI()
ffibuilder.cdef((HERE / "resolver.cdef").read_text() + (HERE / "hook.cdef").read_text())
ffibuilder.set_source(
    "xpu_cdi._native._resolver",
    # hook.c (the OCI hook's syscalls) joins the same extension; #line keeps
    # compiler messages pointing at the right file and line
    (HERE / "resolver.c").read_text() + '\n#line 1 "hook.c"\n' + (HERE / "hook.c").read_text(),
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-std=gnu11", "-pthread"],
    extra_link_args=["-pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
