#!/bin/sh
# `make fuzz-native`: coverage-guided fuzzing (libFuzzer, clang from the
# distribution) of the binaries' parsers (src/xpu_cdi/_native/hotpath/lib/)
# -- fuzz_json.c (fj_parse and fj_dump over yajl) and fuzz_yaml.c (fy_parse
# over libyaml) -- with
# ASan and UBSan, SECONDS each (default 60).
#
#   sh fuzz/native/run.sh [SECONDS] [HARNESS...]
#
# Each harness keeps its corpus and crashes in $XPU_CDI_FUZZ_DIR/native-NAME
# (default /var/tmp/xpu-cdi-fuzz), seeded from the repo's specs and profiles,
# so a later run continues where this one stopped.  Exits non-zero when a
# harness found a crash (the input is saved as crash-*, and reproduces with
# `<dir>/NAME <that file>`).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
src="$repo/src/xpu_cdi/_native/hotpath"
lib="$src/lib"
seconds=${1:-60}
[ $# -gt 0 ] && shift
harnesses=${*:-fuzz_json fuzz_yaml}
work=${XPU_CDI_FUZZ_DIR:-/var/tmp/xpu-cdi-fuzz}
CC=${FUZZ_CC:-clang}

command -v "$CC" >/dev/null 2>&1 || sh "$repo/scripts/install-deps.sh" clang pkg-config libyajl-dev libyaml-dev
libs=$(pkg-config --cflags --libs yajl yaml-0.1)
flags="-g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I$src"
status=0
for name in $harnesses; do
  dir="$work/native-$name"
  mkdir -p "$dir/corpus"
  case $name in
    fuzz_json) extra="$lib/tree_build.c $lib/json_parse.c $lib/json_text.c $lib/json_tree.c $lib/json_write.c"
               for f in "$repo"/tests/data/specs/*.json; do cp "$f" "$dir/corpus/seed-$(basename "$f")"; done ;;
    fuzz_yaml) extra="$lib/tree_build.c $lib/json_parse.c $lib/json_text.c $lib/json_tree.c $lib/json_write.c $lib/yaml_load.c $lib/yaml_scalar.c"
               for f in "$repo"/src/xpu_cdi/profiles/*.yaml; do
                 { printf '\000'; cat "$f"; } > "$dir/corpus/seed-$(basename "$f")"
               done
               printf '\001cdiVersion: 0.6.0\nkind: a.b/c\ndevices:\n- name: "0"\n  containerEdits: &e {env: [A=1]}\n- {name: 1, containerEdits: *e}\n' \
                 > "$dir/corpus/seed-spec.yaml" ;;
    *) echo "fuzz/native: no harness $name (fuzz_json, fuzz_yaml)" >&2; exit 2 ;;
  esac
  # shellcheck disable=SC2086 # flag lists are meant to split
  if ! "$CC" $flags -o "$dir/$name" "$here/$name.c" "$lib/common.c" $extra $libs; then
    echo "fuzz/native: cannot build $name with $CC (libFuzzer's runtime is in libclang-rt-N-dev)" >&2
    exit 2
  fi
  # The binaries never free, by design (lib/common.h): leaks are not findings,
  # and the memory a process accumulates is bounded by running at most 10 s
  # per process (the corpus carries over from one to the next).
  echo "fuzz/native: $name for ${seconds}s" >&2
  left=$seconds
  total=0
  : > "$dir/log"
  while [ "$left" -gt 0 ]; do
    chunk=$(( left < 10 ? left : 10 ))
    left=$(( left - chunk ))
    if ! (cd "$dir" && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
          "./$name" -max_total_time="$chunk" -detect_leaks=0 -rss_limit_mb=2048 -max_len=65536 \
          -print_final_stats=1 corpus 2>>"$dir/log"); then
      tail -n 40 "$dir/log" >&2
      echo "fuzz/native: $name found a crash: $(ls "$dir"/crash-* "$dir"/oom-* "$dir"/timeout-* 2>/dev/null | head -n 1)" >&2
      status=1
      break
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
    total=$(( total + runs ))
  done
  echo "fuzz/native: $name stat::number_of_executed_units: $total" >&2
done
exit $status
