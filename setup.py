"""Hooks the C parts into the setuptools build: the cffi extension
(cffi_modules) and the compiled front end (fast/build.py), built by
build_ext next to the extension so that editable and regular installs
both have it."""
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src", "xpu_cdi", "_native", "fast"))
import build as fast  # noqa: E402


class BuildExtAndFrontEnd(build_ext):
    def run(self):
        super().run()
        here = os.path.dirname(self.get_ext_fullpath("xpu_cdi._native._resolver"))
        fast.build(os.path.join(here, "bin"))

    def get_outputs(self):
        here = os.path.dirname(self.get_ext_fullpath("xpu_cdi._native._resolver"))
        return super().get_outputs() + [os.path.join(here, "bin", t) for t in fast.TARGETS]


setup(cffi_modules=["src/xpu_cdi/_native/build.py:ffibuilder"], cmdclass={"build_ext": BuildExtAndFrontEnd})
