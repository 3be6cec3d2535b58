#!/usr/bin/env bash
# Builds shoal (preset "release") and shows what it does on this machine: shoal-info (version, GPUs, links,
# transports, configuration), then, when there are GPUs and shoal-perf is built, the quick benchmark on
# every GPU under shoalrun. What it cannot run here it names, with the reason, and still exits 0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# NVLink multicast stays off in every process shoal starts (see docs/getting-started.md, "Safety").
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1

source scripts/install-deps.sh

cmake --preset release
cmake --build --preset release --parallel "$(nproc)"
bin=build/release/bin

echo
echo "== shoal-info"
"$bin/shoal-info"
echo

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi

not_run=()
if ((gpus == 0)); then
  not_run+=("the benchmarks (shoal-perf): no GPU here (nvidia-smi -L lists none)")
elif [[ ! -x "$bin/shoal-perf" ]]; then
  not_run+=("the benchmarks: shoal-perf is not built yet (no $bin/shoal-perf)")
elif [[ ! -x "$bin/shoalrun" ]]; then
  not_run+=("the benchmarks: the launcher is not built yet (no $bin/shoalrun)")
else
  echo "== shoalrun -n $gpus -- shoal-perf quick"
  "$bin/shoalrun" -n "$gpus" --timeout 1200 -- "$bin/shoal-perf" quick
  exit $?
fi

for line in "${not_run[@]}"; do echo "main.sh: did not run $line"; done
exit 0
