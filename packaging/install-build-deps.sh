#!/bin/sh
# Install the Debian packages that building and checking the .deb and .rpm
# need (debhelper + dh-python with the pyproject plugin, lintian, rpm,
# rpmlint) and the Debian Python modules the installed package runs on.
# Idempotent: apt-get runs only when something is missing, so `make deb`
# stays fast after the first time.
set -eu

PKGS="
debhelper dh-python pybuild-plugin-pyproject dpkg-dev fakeroot
python3-all-dev python3-setuptools python3-wheel python3-build python3-installer
python3-cffi python3-cffi-backend python3-pycparser
python3-click python3-yaml python3-jsonschema python3-pyudev python3-tomlkit
lintian rpm rpmlint
"

missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-build-deps: missing Debian packages:$missing (run as root, or install them)" >&2
  exit 1
fi
echo "install-build-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# Lists older than a day may name versions the mirror no longer has.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n1)" ]; then
  apt-get update -qq
fi
# shellcheck disable=SC2086 # word splitting of the list is wanted
apt-get install -y -qq --no-install-recommends $missing >/dev/null
