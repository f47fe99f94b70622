#!/bin/sh
# Install the Debian packages that building and checking the .deb and .rpm
# need (debhelper + dh-python with the pyproject plugin, a C compiler with
# pkg-config and the yajl/libyaml headers the compiled front end links,
# lintian, rpm, rpmlint) and the Debian Python modules the installed
# package runs on.
# Idempotent: scripts/install-deps.sh runs apt-get only when something is
# missing, so `make deb` stays fast after the first time.
set -eu
here=$(dirname "$0")
exec sh "$here/../scripts/install-deps.sh" \
  debhelper dh-python pybuild-plugin-pyproject dpkg-dev fakeroot \
  build-essential pkg-config libyajl-dev libyaml-dev \
  python3-all-dev python3-setuptools python3-wheel python3-build python3-installer \
  python3-cffi python3-cffi-backend python3-pycparser \
  python3-click python3-yaml python3-jsonschema python3-pyudev python3-tomlkit \
  lintian rpm rpmlint
