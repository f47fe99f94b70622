#!/bin/sh
# Install Debian packages once: the ones xpu-cdi's build, tests and demo need
# (default), or the ones given as arguments (packaging/install-build-deps.sh).
# apt-get runs only when something is missing, so repeated `make` is fast.
# XPU_CDI_DEPS_CHECK=1: only check, and fail naming what is missing (what the suite sets).
set -eu
# gcc brings libasan8 and libubsan1 (libgcc-12-dev depends on them): the
# sanitized build of tests/c/test_sanitized.py needs nothing more.
# The compiled hook and wrapper parse with yajl and libyaml (pkg-config finds
# them); clang (with libFuzzer's runtime) builds the parsers' fuzzers
# (fuzz/native/, a short run in the suite); strace shows that a container start
# execs no interpreter.  systemd brings systemd-analyze,
# which checks the shipped units (not as init: nothing here needs it running;
# a minimal Debian 13 install has no systemd package at all).  The one-node Kubernetes
# cluster of tests/k8s/ (built from Go modules) needs openssl (its certificates), iproute2
# (the node's loopback network) and containernetworking-plugins (its loopback-only CNI).
PKGS="${*:-gcc pkg-config libyajl-dev libyaml-dev clang python3-dev python3-venv runc crun podman containerd busybox-static uidmap iptables systemd strace openssl iproute2 containernetworking-plugins}"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
# The test suite sets XPU_CDI_DEPS_CHECK=1 (tests/conftest.py): a build step a test reaches
# must find everything `make deps` installed, never run apt itself while other tests watch
# the machine (dpkg's conffile handling comes and goes in /etc).
if [ -n "${XPU_CDI_DEPS_CHECK:-}" ]; then
  echo "install-deps: missing Debian packages:$missing (\`make deps\` installs them; the test suite never installs packages itself)" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing Debian packages:$missing (run as root, or install them)" >&2
  exit 1
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# Foreign packages (libyajl-dev:arm64, for the arm64 cross build) need dpkg to know
# their architecture (multiarch), and apt lists of it: added once, then updated.
stale=$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n1)
for a in $(printf '%s\n' $missing | sed -n 's/^[^:]*:\([a-z0-9]*\)$/\1/p' | sort -u); do
  if ! dpkg --print-foreign-architectures | grep -qx "$a"; then
    dpkg --add-architecture "$a"
    stale=""
  fi
done
# Lists older than a day may name versions the mirror no longer has.
if [ -z "$stale" ]; then
  apt-get -o DPkg::Lock::Timeout=600 update -qq
fi
# shellcheck disable=SC2086 # word splitting of the list is wanted
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $missing >/dev/null
