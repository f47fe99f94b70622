# xpu-cdi developer entry points.  Everything installs what it needs:
#   make demo   generate + validate + a real container on a simulated P800 host
#   make test   the whole suite (unit + real runc/crun/podman/containerd)
PYTHON ?= /usr/bin/python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
# Debian's architecture name; the kernel's, renamed, where there is no dpkg (make image on openEuler)
ARCH ?= $(shell dpkg --print-architecture 2>/dev/null || uname -m | sed -e s/x86_64/amd64/ -e s/aarch64/arm64/)

.PHONY: all deps install lint test stress-loop cold-run demo bench fuzz fuzz-native check-schemas clean deb rpm image cross
FUZZ_SECONDS ?= 60

all: install

deps:
	@sh scripts/install-deps.sh
	@# libFuzzer's runtime for fuzz/native: Debian 12's clang-14 pulls it in, Debian 13's
	@# clang-19 only recommends it; the package is named after clang's major version
	@sh scripts/install-deps.sh libclang-rt-$$(clang -dumpversion | cut -d. -f1)-dev
	@# the device plugin's, the exporter's and the DRA driver's tests also run them on Debian's own libraries (what the .deb runs on);
	@sh scripts/install-deps.sh python3-grpcio python3-protobuf python3-prometheus-client python3-bcrypt python3-click python3-yaml python3-jsonschema \
	  python3-pyudev python3-cffi-backend python3-tomlkit python3-kubernetes
	@# zsh: the packages' zsh completion is tried in a real zsh (tests/packaging/test_completions.py)
	@sh scripts/install-deps.sh zsh
	@sh scripts/install-runtime-matrix-deps.sh
	@# the arm64 hook and wrapper (make cross; tests/c/test_cross_arm64.py runs them under qemu-user):
	@# Debian's cross compiler and the arm64 -dev packages (dpkg gets the arm64 architecture once)
	@sh scripts/install-deps.sh $(CROSS_DEPS)
	@# the .deb and .rpm builds (make deb / make rpm, tests/packaging/), and the arm64 .deb's cross
	@# build (tests/packaging/test_deb_arm64.py): installed here, never by a test (the suite only
	@# checks: XPU_CDI_DEPS_CHECK, tests/test_deps.py)
	@sh packaging/install-build-deps.sh
	@[ "$$(dpkg --print-architecture)" = arm64 ] || sh scripts/install-deps.sh $$(sh packaging/deb/cross-build-deps.sh arm64)
	@# go mod download fetches the upstream protos and CDI schema the contract tests read
	@# (tests/support/upstream.py); Go's own tarball in /usr/local/go serves as well.  Where it is
	@# older than the pins need, the suite fetches Go 1.26 with it (docs/testing-go.md)
	@command -v go >/dev/null || test -x /usr/local/go/bin/go || sh scripts/install-deps.sh golang-go

$(STAMP): pyproject.toml setup.py src/xpu_cdi/_version.py $(wildcard src/xpu_cdi/_native/*.c src/xpu_cdi/_native/*.cdef src/xpu_cdi/_native/*.py) \
  $(shell find src/xpu_cdi/_native/hotpath -name '*.[ch]')
	@$(MAKE) --no-print-directory deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	# the compiled hook and wrapper (built by setup.py into _native/bin) are what
	# runtimes exec: copied (not linked into the source tree, which `make clean`
	# empties) beside xpu-cdi, where `generate --hook-path` and `runtime configure`
	# look first; `install` replaces the file, so a container start running the old
	# copy is not disturbed.
	install -m 0755 src/xpu_cdi/_native/bin/xpu-cdi-hook src/xpu_cdi/_native/bin/xpu-container-runtime $(BIN)/
	touch $@

# scripts/ (demo, bench) are built on the tests' helpers (fake hosts, runtimes, the cluster):
# the dev venv imports tests/support as `support`, as pytest's pythonpath does, through a
# .pth file (docs/architecture.md), so a script needs no sys.path of its own.
SUPPORT_PTH := $(VENV)/.support-pth
$(SUPPORT_PTH): $(STAMP)
	$(BIN)/python -c 'import pathlib, sys, sysconfig; pathlib.Path(sysconfig.get_path("purelib"), "xpu_cdi_test_support.pth").write_text(sys.argv[1] + "\n")' '$(CURDIR)/tests'
	touch $@

install: $(STAMP) $(SUPPORT_PTH)

lint: install
	$(BIN)/ruff check src tests scripts fuzz setup.py

# The package test installs the .deb system-wide (hooks.d file included) for a
# few seconds: it runs alone, after the parallel suite.  --dist loadgroup: the tests
# on the one-node Kubernetes cluster (tests/k8s/, one xdist group) share one worker
# and so one cluster.
test: install lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup --ignore=tests/packaging/test_packages.py $(PYTEST_ARGS)
	$(BIN)/python -m pytest -q tests/packaging/test_packages.py

# the timing-sensitive modules RUNS times in a row beside stress-ng on every core, stopping at the
# first failure or leftover; one line per run in stress-loop.log (docs/testing.md#under-load)
RUNS ?= 20
stress-loop: install
	@sh scripts/install-deps.sh stress-ng
	$(BIN)/python scripts/stress-loop.py --runs $(RUNS)

# CI as a fresh machine runs it, here: the packages install-deps.sh added purged, a clean clone of
# HEAD running .ci/run with a new test cache; about an hour (docs/testing.md#a-cold-run)
cold-run: install
	$(BIN)/python scripts/cold-run.py

# ARCH=arm64: the arm64 package, cross-built into packaging/deb/out/arm64/
deb:
	ARCH=$(ARCH) sh packaging/deb/build.sh

rpm:
	sh packaging/rpm/build.sh

# the DaemonSet's image as an archive (packaging/image/out/), deploy/Containerfile built by
# IMAGE_BUILDER (packaging/image/build.py):
#  - buildah: on a debootstrapped Debian 12, no registry needed; the default on Debian and Ubuntu
#    (apt-get present), which it installs buildah and debootstrap with.  ARCH=arm64 on amd64: the
#    arm64 image, its .deb and static binaries cross-built in the build stage on an amd64 Debian 12
#    root (whatever release this machine runs), what must run on arm64 run by qemu-user-static
#  - podman, else docker: the default elsewhere (openEuler, Kylin, ...): the Containerfile alone, its
#    pinned debian:12-slim from the registry, nothing of the host's but the engine
#    (IMAGE_BUILD_ARGS: more arguments for its build, e.g. --network=host)
IMAGE_BUILDER ?= $(if $(shell command -v apt-get 2>/dev/null),buildah,$(if $(shell command -v podman 2>/dev/null),podman,docker))
IMAGE_BUILD_ARGS ?=
image:
	@$(if $(filter buildah,$(IMAGE_BUILDER)),sh scripts/install-deps.sh buildah debootstrap $(if $(filter-out $(shell dpkg --print-architecture 2>/dev/null),$(ARCH)),qemu-user-static),:)
	$(PYTHON) packaging/image/build.py --arch $(ARCH) --builder $(IMAGE_BUILDER) $(foreach a,$(IMAGE_BUILD_ARGS),--engine-arg=$(a))

# the static hook and wrapper for arm64 hosts (Kunpeng), cross-built into build/arm64/bin;
# dpkg-dev: dpkg-architecture names the cross triplet (a minimal Debian 13 lacks it)
CROSS_DEPS := gcc-aarch64-linux-gnu libc6-dev-arm64-cross libyajl-dev:arm64 libyaml-dev:arm64 qemu-user-static dpkg-dev
cross:
	@sh scripts/install-deps.sh $(CROSS_DEPS)
	$(PYTHON) src/xpu_cdi/_native/build_bin.py --static --cross aarch64-linux-gnu --out build/arm64/bin

demo: install
	$(BIN)/python scripts/demo.py

bench: install
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)

# coverage-guided fuzzing of every parser of outside input: the compiled
# front end's (libFuzzer + ASan/UBSan, fuzz/native/) and the Python tooling's
# (atheris); the bounded hypothesis properties and a short libFuzzer run are
# in `make test`
fuzz: install fuzz-native
	$(BIN)/pip install -q -e '.[fuzz]'
	$(BIN)/python fuzz/run.py $(FUZZ_SECONDS)

fuzz-native:
	sh fuzz/native/run.sh $(FUZZ_SECONDS)

check-schemas: install
	$(BIN)/python -m pytest tests/cdi/test_validate.py tests/generate/test_profile.py -q

clean:
	rm -rf $(VENV) build src/*.egg-info packaging/deb/out packaging/rpm/out packaging/image/out src/xpu_cdi/_native/bin \
	  src/xpu_cdi/_native/_hoststat*.so src/xpu_cdi/_native/_hoststat.c src/xpu_cdi/_native/_hoststat.o \
	  src/xpu_cdi/_native/__pycache__
