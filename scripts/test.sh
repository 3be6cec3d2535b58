#!/usr/bin/env bash
# Builds shoal (preset "release") and runs its whole test suite, as CI does. Needs no GPU: tests that need
# one skip and say why. Usage: scripts/test.sh [extra ctest arguments, e.g. -L cpu or -R topology]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# NVLink multicast stays off in every process shoal starts (see docs/getting-started.md, "Safety").
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1

source scripts/install-deps.sh

jobs=$(nproc)
cmake --preset release
cmake --build --preset release --parallel "$jobs"
# --timeout is the limit of any test that does not set its own.
ctest --preset release --parallel "$jobs" --timeout 600 --output-on-failure --no-tests=error "$@"
