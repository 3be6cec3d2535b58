#!/usr/bin/env bash
# Installs what building and testing shoal needs on Debian or Ubuntu, and nothing that is already there:
# each package is checked with dpkg first, and apt-get runs only when something is missing.
# The CUDA toolkit (nvcc) is not an apt package here: it is expected at /usr/local/cuda (or on PATH).
#
# Run it (bash scripts/install-deps.sh) or source it (scripts/test.sh and scripts/main.sh do): when sourced,
# it also leaves nvcc on the caller's PATH.

shoal_install_deps() {
  local packages=(cmake ninja-build g++ libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev python3 libucx-dev
    libopenmpi-dev openmpi-bin)
  local missing=() p
  for p in "${packages[@]}"; do
    if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then missing+=("$p"); fi
  done
  if ((${#missing[@]} > 0)); then
    echo "install-deps: installing ${missing[*]}"
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
    # Explicit checks: errexit does not apply inside a function called from a `||` list.
    "${sudo[@]}" apt-get update || return 1
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" || return 1
  else
    echo "install-deps: all packages present"
  fi

  if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  if ! command -v nvcc >/dev/null 2>&1; then
    echo "install-deps: nvcc not found: install the CUDA toolkit (12.x or later) from NVIDIA; it is expected at" \
      "/usr/local/cuda" >&2
    return 1
  fi
  echo "install-deps: nvcc is $(command -v nvcc) ($(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  shoal_install_deps
else
  shoal_install_deps || return 1
fi
