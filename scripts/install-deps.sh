#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages cc needs, by what they are for; CUDA and
# NCCL are expected already (/usr/local/cuda, or pass -Dcudatoolkit=/-Dnccl_dir=).
#
#   scripts/install-deps.sh [SET...]    SET: build, test (the default), hardening
#
# build: what compiles libcc, its etcd plugin, the tools and the examples
#   (scripts/demo.sh, the Docker image). cpp-httplib is the etcd backend's
#   HTTP client and cc-rendezvous's metrics endpoint.
# test: build, and what the suites use: Catch2; Open MPI (the mpi suite); etcd
#   (the etcd suite); systemd and python3-yaml (the packaging suite verifies
#   the systemd unit and parses the compose file); nftables (the netns suite
#   puts a rank behind a NAT as Docker's bridge does); cmake (the CMake
#   package's version file, and the packaging suite's CMake consumer).
# hardening: clang and its sanitizer runtimes (scripts/ci-hardening.sh).
set -euo pipefail
build_pkgs=(meson ninja-build g++ pkg-config libasio-dev libspdlog-dev libfmt-dev libcli11-dev
            nlohmann-json3-dev libssl-dev libcpp-httplib-dev)
test_pkgs=("${build_pkgs[@]}" catch2 openmpi-bin libopenmpi-dev iproute2 procps python3
           python3-numpy python3-yaml systemd nftables etcd-server etcd-client cmake openssl)
hardening_pkgs=(clang-14 libclang-rt-14-dev)
sets=("$@")
[ ${#sets[@]} -eq 0 ] && sets=(test)
pkgs=()
for s in "${sets[@]}"; do
  case "$s" in
    build) pkgs+=("${build_pkgs[@]}") ;;
    test) pkgs+=("${test_pkgs[@]}") ;;
    hardening) pkgs+=("${hardening_pkgs[@]}") ;;
    *) echo "install-deps: no package set '$s' (build, test, hardening)" >&2; exit 2 ;;
  esac
done
missing=()
for p in $(printf '%s\n' "${pkgs[@]}" | sort -u); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present (${sets[*]})"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
