#!/bin/sh
# The packages a cross build for architecture $1 needs beside the package's own Build-Depends
# (of the build machine): Debian's cross compiler and the target's -dev packages (dpkg multiarch).
# One list for `make deb ARCH=arm64` (packaging/deb/build.sh) and the image's build stage
# (deploy/Containerfile, which cross-compiles for another architecture on the builder's own).
# libc6-dev: glibc's static archive for the host copy of the hook (build_bin.py --static).
set -eu
a=$1
echo "crossbuild-essential-$a libc6-dev:$a libpython3-dev:$a libyajl-dev:$a libyaml-dev:$a"
