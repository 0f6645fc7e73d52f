#!/usr/bin/env bash
# Installs exactly the Debian 12 packages tunepar needs that are missing, with apt-get.
# Idempotent: a second run installs nothing. Nothing is downloaded from anywhere but the
# Debian archive configured in /etc/apt.
#   scripts/install-deps.sh           build and test dependencies
#   scripts/install-deps.sh --bench   also the peers the benchmarks compare against
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libnlopt-cxx-dev libeigen3-dev libsqlite3-dev sqlite3
  libopenmpi-dev openmpi-bin
  libspdlog-dev libfmt-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  librsvg2-bin  # rsvg-convert: the tests render every chart to PNG
  hipcc libamdhip64-dev  # the HIP build of tunepar-core (compile-checked; runs without a GPU)
  slurm-wlm munge iproute2  # the slurm backend's tests run a real Slurm (scripts/slurm-cluster.sh)
  # PyTorch, the reference that tunepar-core's step is checked against (tests/torch_reference/,
  # run with Debian's /usr/bin/python3; 1.13.1 in Debian 12: 170 packages, 635 MB, 75 s here).
  python3 python3-torch
)
if [ "${1:-}" = "--bench" ]; then
  # Peers run by bench/ (with Debian's /usr/bin/python3): Optuna's TPE, scikit-learn's GP,
  # PyTorch on the CPU (python3-torch, above; with OpenBLAS, as its users would set it up).
  packages+=(python3-numpy python3-scipy python3-optuna python3-sklearn libopenblas0-pthread)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are absent or a first install attempt fails.
if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -E '^(lock|partial|auxfiles)$')" ]; then
  $sudo apt-get update -q
fi
if ! $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
