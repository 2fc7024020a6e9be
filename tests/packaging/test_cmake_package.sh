#!/usr/bin/env bash
# cc's CMake package as a CMake user meets it: `meson install` into a
# temporary prefix (DESTDIR), CMake's version rules on ccConfigVersion.cmake
# through find_package, then examples/cmake (the C all-reduce example
# against cc::cc and cc::cc_static) configured, built and run as one rank.
# Without a GPU each program must stop at cc_comm_init_from_env with cc's
# CC_ERR_NO_DEVICE message; with one, its all-reduce must give 1.0.
#
#   test_cmake_package.sh BUILD SOURCE CUDA_ROOT
set -uo pipefail
build=$1 src=$2 cuda=$3
fail() { echo "FAIL: $*"; exit 1; }
command -v cmake >/dev/null || { echo "SKIP: no cmake here (scripts/install-deps.sh installs it)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

option() {  # a meson option of the build
  meson introspect "$build" --buildoptions |
    python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"
}
version=$(meson introspect "$build" --projectinfo | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
prefix=$tmp/root$(option prefix)
libdir=$(option libdir)
case $libdir in /*) libdir=${libdir#"$(option prefix)"/} ;; esac

meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "meson install --destdir failed"; }
package=$prefix/$libdir/cmake/cc
for f in ccConfig.cmake ccConfigVersion.cmake; do
  [ -f "$package/$f" ] || fail "meson install wrote no $libdir/cmake/cc/$f (files: $(cd "$tmp/root" && find . -name '*.cmake'))"
done
echo "installed: $package"

# CMake's version rules (SameMajorVersion) against the installed version.
IFS=. read -r major minor patch <<<"$version"
mkdir -p "$tmp/versions"
cat >"$tmp/versions/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.18)
project(cc_versions LANGUAGES C)
foreach(want IN LISTS WANTS)
  find_package(cc ${want} CONFIG QUIET)
  message(STATUS "cc ${want}: ${cc_FOUND}")
  unset(cc_FOUND)
endforeach()
find_package(cc ${EXACT} EXACT CONFIG QUIET)
message(STATUS "cc ${EXACT} EXACT: ${cc_FOUND}")
CMAKE
accepted=("$major.$minor" "$version" "$major")
refused=("$((major + 1)).0" "$major.$((minor + 1))")
wants=$(IFS=';'; echo "${accepted[*]};${refused[*]}")
cmake -S "$tmp/versions" -B "$tmp/versions/build" -DCMAKE_PREFIX_PATH="$prefix" \
  "-DWANTS=$wants" -DEXACT="$version" >"$tmp/versions.log" 2>&1 ||
  { cat "$tmp/versions.log"; fail "the version project did not configure"; }
for v in "${accepted[@]}"; do
  grep -q -- "-- cc $v: 1$" "$tmp/versions.log" || { cat "$tmp/versions.log"; fail "find_package(cc $v) did not find cc $version"; }
done
for v in "${refused[@]}"; do
  grep -q -- "-- cc $v: 0$" "$tmp/versions.log" || { cat "$tmp/versions.log"; fail "find_package(cc $v) accepted cc $version"; }
done
grep -q -- "-- cc $version EXACT: 1$" "$tmp/versions.log" || { cat "$tmp/versions.log"; fail "find_package(cc $version EXACT) failed"; }
echo "versions: ${accepted[*]} accepted, ${refused[*]} refused, as CMake's SameMajorVersion rule says"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$src/examples/cmake" -B "$tmp/consumer" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCUDAToolkit_ROOT="$cuda" >"$tmp/configure.log" 2>&1 ||
  { cat "$tmp/configure.log"; fail "examples/cmake did not configure against the installed cc"; }
cmake --build "$tmp/consumer" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "examples/cmake did not build"; }
programs=(allreduce)
if [ -f "$prefix/$libdir/libcc.a" ]; then
  programs+=(allreduce_static)
  [ -x "$tmp/consumer/allreduce_static" ] || { cat "$tmp/configure.log"; fail "libcc.a is installed but cc::cc_static was not defined"; }
fi
# ldd's output read whole first: `ldd | grep -q` under pipefail fails
# whenever grep stops reading before ldd has written everything (SIGPIPE).
libs=$(ldd "$tmp/consumer/allreduce")
grep -q "libcc.so.0 => $prefix/$libdir/" <<<"$libs" ||
  { echo "$libs"; fail "allreduce does not load the installed libcc.so.0"; }
static_libs=$(ldd "$tmp/consumer/allreduce_static" 2>/dev/null || true)
if grep -q "libcc.so" <<<"$static_libs"; then
  fail "allreduce_static loads libcc.so; it should hold libcc.a"
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for p in "${programs[@]}"; do
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port CC_LOG_LEVEL=error \
    timeout 120 "$tmp/consumer/$p" >"$tmp/$p.out" 2>"$tmp/$p.err"
  rc=$?
  if [ $rc -eq 0 ]; then
    grep -q "rank 0 of 1: after all-reduce: 1.0" "$tmp/$p.out" || { cat "$tmp/$p.out"; fail "$p: no all-reduce result"; }
    echo "$p: ran on a GPU, all-reduce gave 1.0"
  else
    grep -q "^cc_comm_init_from_env: CC_ERR_NO_DEVICE" "$tmp/$p.err" ||
      { cat "$tmp/$p.out" "$tmp/$p.err"; fail "$p exited $rc, not with cc's CC_ERR_NO_DEVICE words"; }
    echo "$p: no GPU here, stopped with: $(head -n 1 "$tmp/$p.err")"
  fi
done
echo "PASS"
