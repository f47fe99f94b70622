#!/bin/sh
# Build the xpu-cdi Debian source and binary packages from this checkout
# (the working tree, uncommitted changes included) into packaging/deb/out/,
# then run lintian and fail on any error.  Called by `make deb`.
#
#   sh packaging/deb/build.sh            build + lintian
#   LINTIAN=0 sh packaging/deb/build.sh  build only
#   BUILD_DEPS=0 ...                     the build dependencies are installed already
#                                        (the image's build stage: apt-get build-dep)
set -eu
# Debian's own interpreter and tools only: a version manager's python3 or
# an active venv on PATH would build the extension for the wrong Python.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV PYENV_VERSION 2>/dev/null || true

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT="$HERE/out"
VERSION=$(sed -n '1s/^xpu-cdi (\([^)]*\)).*/\1/p' "$HERE/debian/changelog")
STAGE="$OUT/build/xpu-cdi-$VERSION"

[ "${BUILD_DEPS:-1}" = 0 ] || sh "$REPO/packaging/install-build-deps.sh"

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
dpkg-buildpackage -us -uc --build=source,binary >"$OUT/build.log" 2>&1 || {
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
