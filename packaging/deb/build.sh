#!/bin/sh
# Build the xpu-cdi Debian source and binary packages from this checkout
# (the working tree, uncommitted changes included) into packaging/deb/out/,
# then run lintian and fail on any error.  Called by `make deb`.
#
#   sh packaging/deb/build.sh            build + lintian
#   LINTIAN=0 sh packaging/deb/build.sh  build only
#   BUILD_DEPS=0 ...                     the build dependencies are installed already
#                                        (the image's build stage: apt-get build-dep)
#   ARCH=arm64 sh packaging/deb/build.sh the arm64 binary package, cross-built with Debian's
#                                        toolchain into packaging/deb/out/arm64/ (`make deb ARCH=arm64`)
set -eu
# Debian's own interpreter and tools only: a version manager's python3 or
# an active venv on PATH would build the extension for the wrong Python.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV PYENV_VERSION 2>/dev/null || true

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
NATIVE=$(dpkg --print-architecture)
ARCH=${ARCH:-$NATIVE}
OUT="$HERE/out"
[ "$ARCH" = "$NATIVE" ] || OUT="$HERE/out/$ARCH"
VERSION=$(sed -n '1s/^xpu-cdi (\([^)]*\)).*/\1/p' "$HERE/debian/changelog")
STAGE="$OUT/build/xpu-cdi-$VERSION"

[ "${BUILD_DEPS:-1}" = 0 ] || sh "$REPO/packaging/install-build-deps.sh"
# A cross build: the compiler and the -dev packages of that architecture (multiarch), the
# build dependencies checked by hand (-d: python3-all-dev:arm64 cannot sit beside the host's
# python3), no test step (the extension cannot load here) and binary packages only.
CROSS="" BUILD=source,binary
if [ "$ARCH" != "$NATIVE" ]; then
    TRIPLET=$(dpkg-architecture -a"$ARCH" -qDEB_HOST_GNU_TYPE 2>/dev/null)
    # shellcheck disable=SC2046 # the list is words
    [ "${BUILD_DEPS:-1}" = 0 ] || sh "$REPO/scripts/install-deps.sh" $(sh "$HERE/cross-build-deps.sh" "$ARCH")
    export CC="$TRIPLET-gcc" DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}"
    CROSS="--host-arch $ARCH -d" BUILD=any
fi

rm -rf "$OUT/build"
mkdir -p "$STAGE"
rm -f "$OUT"/xpu-cdi*_*

# The source package is the project as it is checked out, minus build
# output and local environments.
cd "$REPO"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard \
        | xargs -0 sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh \
        | grep -zv '^packaging/deb/debian/' \
        | tar -c --null -T - -f - | tar -x -C "$STAGE" -f -
else
    tar -c --exclude=.venv --exclude=.git --exclude='packaging/*/out' --exclude=build \
        --exclude='*.egg-info' --exclude=__pycache__ --exclude='*.so' -f - . | tar -x -C "$STAGE" -f -
fi
cp -r "$HERE/debian" "$STAGE/debian"

cd "$STAGE"
# -us -uc: unsigned; the .dsc/.tar.xz show it is a real source package.
# shellcheck disable=SC2086 # $CROSS is two options or none
dpkg-buildpackage -us -uc --build="$BUILD" $CROSS >"$OUT/build.log" 2>&1 || {
    tail -n 40 "$OUT/build.log" >&2
    echo "deb: dpkg-buildpackage failed; full log in $OUT/build.log" >&2
    exit 1
}
mv "$OUT"/build/xpu-cdi*_"$VERSION"[._]* "$OUT"/
ls "$OUT"/xpu-cdi_"$VERSION"_*.deb

if [ "${LINTIAN:-1}" != 0 ]; then
    # Errors fail the build; warnings are shown.  Overrides, each with its
    # reason, are in debian/xpu-cdi.lintian-overrides.
    lintian --fail-on error --display-info --tag-display-limit 0 \
        "$OUT"/xpu-cdi_"$VERSION"_*.changes
fi
