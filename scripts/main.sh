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

why_not=()
((gpus > 0)) || why_not+=("no GPU here (nvidia-smi -L lists none)")
[[ -x "$bin/shoal-perf" ]] || why_not+=("shoal-perf is not built yet (no $bin/shoal-perf)")
[[ -x "$bin/shoalrun" ]] || why_not+=("shoalrun is not built (no $bin/shoalrun)")

if ((${#why_not[@]} == 0)); then
  echo "== shoalrun -n $gpus -- shoal-perf quick"
  exec "$bin/shoalrun" -n "$gpus" --timeout 1200 -- "$bin/shoal-perf" quick
fi

echo "main.sh: did not run the benchmarks (shoalrun -n <GPUs> -- shoal-perf quick):"
for reason in "${why_not[@]}"; do echo "  - $reason"; done
exit 0
