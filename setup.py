"""Hooks the C parts into the setuptools build: the cffi extension
(cffi_modules) and the two executables of the container start path
(src/xpu_cdi/_native/build_bin.py), built by build_ext next to the
extension so that editable and regular installs both have them.

build_bin.py is loaded by its path, not imported: the package it lives in
is what is being built (and importing xpu_cdi._native would load the
extension that does not exist yet)."""
import importlib.util
import os

from setuptools import setup
from setuptools.command.build_ext import build_ext

_spec = importlib.util.spec_from_file_location(
    "xpu_cdi_build_bin", os.path.join(os.path.dirname(os.path.abspath(__file__)), "src", "xpu_cdi", "_native",
                                      "build_bin.py"))
build_bin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_bin)


class BuildExtAndBinaries(build_ext):
    def run(self):
        super().run()
        here = os.path.dirname(self.get_ext_fullpath("xpu_cdi._native._hoststat"))
        build_bin.build(os.path.join(here, "bin"))

    def get_outputs(self):
        here = os.path.dirname(self.get_ext_fullpath("xpu_cdi._native._hoststat"))
        return super().get_outputs() + [os.path.join(here, "bin", t) for t in build_bin.TARGETS]


setup(cffi_modules=["src/xpu_cdi/_native/build.py:ffibuilder"], cmdclass={"build_ext": BuildExtAndBinaries})
