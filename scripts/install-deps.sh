#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages cc builds and tests with. CUDA and NCCL
# are expected already (/usr/local/cuda, or pass -Dcudatoolkit=/-Dnccl_dir=).
set -euo pipefail
# libboost-dev: Boost.Beast, header-only, for cc-rendezvous's metrics
# endpoint. systemd and python3-yaml: the packaging suite verifies the
# systemd unit and parses the compose file. nftables: the netns suite puts a
# rank behind a NAT as Docker's bridge does. cmake: the CMake package's
# version file, and the packaging suite's CMake consumer.
pkgs=(meson ninja-build g++ pkg-config libasio-dev libspdlog-dev libfmt-dev catch2
      libcli11-dev nlohmann-json3-dev libssl-dev libboost-dev openmpi-bin libopenmpi-dev
      iproute2 procps python3 python3-numpy python3-yaml systemd nftables
      libcpp-httplib-dev etcd-server etcd-client cmake)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
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
