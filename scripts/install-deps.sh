#!/usr/bin/env bash
# Installs exactly the Debian 12 packages tunepar needs that are missing, with apt-get.
# Idempotent: a second run installs nothing. Nothing is downloaded from anywhere but the
# Debian archive configured in /etc/apt.
#   bash scripts/install-deps.sh --minimal   what building tunepar and tunepar-core needs (the
#                                            README's first command): no PyTorch, Slurm or HIP
#   bash scripts/install-deps.sh             also what the test suite needs
#   bash scripts/install-deps.sh --bench     also the peers the benchmarks compare against
# With --list it prints the chosen packages, one a line, and installs nothing
# (tests/install_deps_test.sh reads the minimal set that way).
# Exit codes: 0 installed or all present, 2 unknown argument, else apt-get's.
set -euo pipefail

# The minimal set: configure, build `--target tunepar tunepar-core`, and run them (tunepar-core
# through mpirun). Its one home; tests/install_deps_test.sh checks it holds nothing of the tests'.
minimal_packages=(
  build-essential cmake pkg-config git
  libnlopt-cxx-dev libeigen3-dev libsqlite3-dev
  libopenmpi-dev openmpi-bin
  libspdlog-dev libfmt-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
)
# The rest of what the test suite (-DTUNEPAR_BUILD_TESTS=ON) builds and runs.
test_packages=(
  sqlite3  # the store's tests read and damage shards with the sqlite3 shell
  libgtest-dev libgmock-dev libbenchmark-dev
  librsvg2-bin  # rsvg-convert: the tests render every chart to PNG
  hipcc libamdhip64-dev  # the HIP build of tunepar-core (compile-checked; runs without a GPU)
  slurm-wlm munge iproute2  # the slurm backend's tests run a real Slurm (scripts/slurm-cluster.sh)
  # PyTorch, the reference that tunepar-core's step is checked against (tests/torch_reference/,
  # run with Debian's /usr/bin/python3; 1.13.1 in Debian 12: 170 packages, 635 MB, 75 s here).
  python3 python3-torch
)
# Peers run by bench/ (with Debian's /usr/bin/python3): Optuna's TPE, scikit-learn's GP,
# PyTorch on the CPU (python3-torch, above; with OpenBLAS, as its users would set it up).
bench_packages=(python3-numpy python3-scipy python3-optuna python3-sklearn libopenblas0-pthread)

set_name=tests
list_only=0
for arg in "$@"; do
  case "$arg" in
    --minimal) set_name=minimal ;;
    --bench) set_name=bench ;;
    --list) list_only=1 ;;
    *) echo "install-deps: unknown argument '$arg' (--minimal, --bench, --list)" >&2; exit 2 ;;
  esac
done
packages=("${minimal_packages[@]}")
case "$set_name" in
  tests) packages+=("${test_packages[@]}") ;;
  bench) packages+=("${test_packages[@]}" "${bench_packages[@]}") ;;
esac

if [ "$list_only" -eq 1 ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present ($set_name set)"
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
