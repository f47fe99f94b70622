#!/bin/sh
# Build the xpu-cdi RPM (and SRPM) from this checkout with rpmbuild into
# packaging/rpm/out/, then run rpmlint and fail on any error.  Called by
# `make rpm`; works on Debian (the `rpm` package) as on openEuler/RHEL.
#
#   sh packaging/rpm/build.sh            build + rpmlint
#   RPMLINT=0 sh packaging/rpm/build.sh  build only
set -eu
# The distribution's own python3 builds the extension, never a venv's.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV PYENV_VERSION 2>/dev/null || true

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT="$HERE/out"
SPEC="$HERE/xpu-cdi.spec"
VERSION=$(sed -n 's/^Version:[[:space:]]*//p' "$SPEC")
TOP="$OUT/rpmbuild"

if [ -f /etc/debian_version ]; then
    sh "$REPO/packaging/install-build-deps.sh"
fi

rm -rf "$TOP" "$OUT"/*.rpm
mkdir -p "$TOP/SOURCES" "$TOP/SPECS"

# Source0: the project as checked out (working tree), minus build output.
cd "$REPO"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard \
        | xargs -0 sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh \
        | tar -c --null -T - --transform "s,^,xpu-cdi-$VERSION/," -z -f "$TOP/SOURCES/xpu-cdi-$VERSION.tar.gz"
else
    tar -c --exclude=.venv --exclude=.git --exclude='packaging/*/out' --exclude=build \
        --exclude='*.egg-info' --exclude=__pycache__ --exclude='*.so' \
        --transform "s,^\./,xpu-cdi-$VERSION/," -z -f "$TOP/SOURCES/xpu-cdi-$VERSION.tar.gz" .
fi
cp "$SPEC" "$TOP/SPECS/"

set -- --define "_topdir $TOP"
if [ -f /etc/debian_version ]; then
    # Debian's rpm database knows nothing of the dpkg-installed build
    # dependencies (install-build-deps.sh put them there), and Debian has
    # no find-debuginfo: skip both checks there, nowhere else.
    set -- "$@" --nodeps --define "debug_package %{nil}"
fi
rpmbuild -ba "$@" "$TOP/SPECS/xpu-cdi.spec" >"$OUT/build.log" 2>&1 || {
    tail -n 40 "$OUT/build.log" >&2
    echo "rpm: rpmbuild failed; full log in $OUT/build.log" >&2
    exit 1
}
find "$TOP/RPMS" "$TOP/SRPMS" -name '*.rpm' -exec mv {} "$OUT/" \;
ls "$OUT"/*.rpm

if [ "${RPMLINT:-1}" != 0 ]; then
    # Filters, each with its reason, are in rpmlintrc next to the spec.
    rpmlint -r "$HERE/xpu-cdi.rpmlintrc" "$SPEC" "$OUT"/*.rpm
fi
