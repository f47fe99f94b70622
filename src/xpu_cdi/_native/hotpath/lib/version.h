/* The package version (src/xpu_cdi/_version.py, its one place): build_bin.py
 * passes it as -DXPU_CDI_VERSION, so `--version` of both binaries says the
 * release of the tooling that wrote the specs they read. */
#ifndef XF_VERSION_H
#define XF_VERSION_H
#ifndef XPU_CDI_VERSION
#error "XPU_CDI_VERSION is not defined: build with src/xpu_cdi/_native/build_bin.py"
#endif
/* "PROG, version X": the shape of `xpu-cdi --version` (click's) */
#define XF_VERSION_LINE(prog) prog ", version " XPU_CDI_VERSION "\n"
#endif
