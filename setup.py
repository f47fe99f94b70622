"""Only here to hook the cffi extension into the setuptools build."""
from setuptools import setup

setup(cffi_modules=["src/xpu_cdi/_native/build.py:ffibuilder"])
