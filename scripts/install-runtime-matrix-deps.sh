#!/bin/sh
# The host side of the test suite's runtime matrix (tests/support/releasetree.py):
# debootstrap (builds the other Debian release's runtimes in a tree, and the
# base of the DaemonSet's image with buildah: packaging/image/build.py),
# docker.io (the host's own Docker line) and rpm (rpmspec, for the .rpm
# scriptlet tests).  Installing docker.io must not start a dockerd on the
# machine (it would rewrite iptables and add a bridge): while it installs, a
# policy-rc.d refuses every service start, unless the machine already has one.
set -eu
here=$(dirname "$0")
policy=/usr/sbin/policy-rc.d
ours=""
# (only when something may be installed: XPU_CDI_DEPS_CHECK=1 only checks, see install-deps.sh)
if [ -z "${XPU_CDI_DEPS_CHECK:-}" ] && [ "$(id -u)" -eq 0 ] && [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# written by xpu-cdi install-runtime-matrix-deps.sh while it installs\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  ours=1
fi
rc=0
sh "$here/install-deps.sh" debootstrap docker.io rpm buildah || rc=$?
# Debian 13's docker.io no longer ships the client: it moved to docker-cli (only
# a Recommends there, and recommends are not installed).  Asked for when no
# package provides /usr/bin/docker, so Debian 12 (client in docker.io) is unchanged.
if [ "$rc" -eq 0 ] && ! dpkg-query -S /usr/bin/docker >/dev/null 2>&1; then
  sh "$here/install-deps.sh" docker-cli || rc=$?
fi
[ -n "$ours" ] && rm -f "$policy"
exit "$rc"
