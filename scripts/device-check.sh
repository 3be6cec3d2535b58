#!/usr/bin/env bash
# One-call check on a machine with GPUs: the GPU test tier at 1 and 2 PEs, the debug-build device
# traps, and (when built) shoal-perf's quick suite with NCCL and NVSHMEM beside it. Logs go to $OUT (default ./out);
# a short summary table is printed last. Uses an existing build (SHOAL_BUILD_DIR, default build/release).
# The tier also runs with its 2 PEs on 2 emulated nodes (every peer through the proxy), and its team tests
# with 3 PEs on 2 uneven emulated nodes (SKIP_ACROSS_NODES=1 leaves both out); the heap tests run with 2 MiB
# chunks under a limit of 256 open files, the examples at 2 PEs, a team destroyed after its world, the
# hierarchical all-reduce refused alike at 4 PEs on 2 emulated nodes when one PE has too few work queues,
# and (with 2 GPUs or more) a PE that dies across emulated nodes.
# Knobs: GTEST_FILTER, SKIP_TESTS=1 (perf only), SKIP_PERF=1, PERF_SUITE (default quick), PERF_ARGS,
# PERF_TAG (log and JSON file names, to run several suites into one $OUT), PERF_TIMEOUT (seconds, default
# 500), PERF_PES (PEs of the perf run, default 2; e.g. PES="1 2 4 8" PERF_PES=8 PERF_SUITE=coll on a
# machine of 8 GPUs), PES (PE counts of the
# test tier, default "1 2"), SKIP_PROBES=1, CARRIED_UCX (a folder made by scripts/fetch-ucx-debs.sh, for a machine
# without UCX), EMULATE_NODES (exported as SHOAL_EMULATE_NODES: every path across nodes on one host),
# MPS (auto: a run with more PEs than GPUs shares them through a private MPS daemon when the driver has one;
# 0: never, so PEs sharing a GPU take turns on it; see docs/getting-started.md, "More PEs than GPUs"),
# SANITIZE (compute-sanitizer tools to run over the tier, e.g. "memcheck racecheck synccheck"; SANITIZE_PES,
# default 1, and SANITIZE_TIMEOUT).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
BUILD=${SHOAL_BUILD_DIR:-build/release}
OUT=${OUT:-out}
mkdir -p "$OUT"
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$BUILD/src${nccl_lib:+:$nccl_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NVSHMEM beside shoal in quick (when the build found it): every PE is on this host.
export NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=${NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME:-lo} NVSHMEM_REMOTE_TRANSPORT=${NVSHMEM_REMOTE_TRANSPORT:-none}
export SHOAL_HEAP_SIZE=64M SHOAL_HEAP_CHUNK_SIZE=32M SHOAL_HEAP_MAX_SIZE=2G SHOAL_WAIT_TIMEOUT=20 SHOAL_BOOTSTRAP_TIMEOUT=60
if [ -n "${CARRIED_UCX:-}" ]; then
  ucx_lib=$(realpath "$CARRIED_UCX")/core/usr/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH=$ucx_lib:$LD_LIBRARY_PATH UCX_MODULE_DIR=$ucx_lib/ucx
fi
# Across (emulated) nodes kernels must load eagerly: see docs/proxy-design.md, "Lazy module loading".
[ -n "${EMULATE_NODES:-}" ] && export SHOAL_EMULATE_NODES=$EMULATE_NODES CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{ nvidia-smi -L; nvidia-smi topo -m; } > "$OUT/machine.txt" 2>&1

SHOALRUN=$BUILD/bin/shoalrun
source scripts/gpu-sharing.sh
trap mps_stop EXIT
most_pes=2
for n in ${PES:-1 2} ${PERF_PES:-2} ${SANITIZE:+${SANITIZE_PES:-1}} 3 4; do [ "$n" -gt "$most_pes" ] && most_pes=$n; done
mps_start_for $most_pes

summary=()
record() { summary+=("$(printf '%-28s %-6s %6ss  %s' "$1" "$2" "$3" "$4")"); }

# Steps may share a log (the examples); each log starts empty in this run, so that a reused OUT never lends
# an earlier run's lines to this one's verdicts.
declare -A logs_started=()
run_step() {  # name log -- command...
  local name=$1 log=$2; shift 3
  local start=$SECONDS
  [ -n "${logs_started[$log]:-}" ] || { : > "$OUT/$log"; logs_started[$log]=1; }
  "$@" >> "$OUT/$log" 2>&1
  local rc=$?
  local verdict=pass; [ $rc -ne 0 ] && verdict=FAIL
  local detail=$(grep -E '^\[[0-9]+\] \[  (PASSED|FAILED|SKIPPED) \]' "$OUT/$log" | tail -3 | tr '\n' ' ')
  record "$name" "$verdict" $((SECONDS - start)) "rc=$rc $detail"
}

# A binary the steps below need but the build lacks is a failure, not a step left out of the summary.
needed=(shoalrun)
[ "${SKIP_TESTS:-0}" = 1 ] || needed+=(shoal_gpu_tests ring_exchange allreduce halo_exchange moe_dispatch_combine)
[ "${SKIP_TESTS:-0}" = 1 ] || [ "${SKIP_PROBES:-0}" = 1 ] || needed+=(shoal_gpu_debug_probe)
[ "${SKIP_PERF:-0}" = 1 ] || needed+=(shoal-perf)
for binary in "${needed[@]}"; do
  [ -x "$BUILD/bin/$binary" ] || record "built: $binary" FAIL 0 "$BUILD/bin/$binary is missing"
done

for n in ${PES:-1 2}; do
  if [ "$gpus" -ge 1 ] && [ "${SKIP_TESTS:-0}" != 1 ]; then
    run_step "gpu tests, $n PE$(sharing $n)" "gpu_tests_${n}pe.log" -- launch $n --timeout 480 -- "$BUILD/bin/shoal_gpu_tests" ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER}
  fi
done

# The tier again with its 2 PEs on 2 emulated nodes, so every peer is reached through the proxy and the
# network: the paths of a job across nodes (heap growth across nodes raced here once, entry 73 of
# docs/perf-notes.md). Not when EMULATE_NODES already applies to the whole run, nor with SKIP_ACROSS_NODES=1;
# a skip when the build has no network (no UCX).
if [ "$gpus" -ge 1 ] && [ "${SKIP_TESTS:-0}" != 1 ] && [ "${SKIP_ACROSS_NODES:-0}" != 1 ] && [ -z "${EMULATE_NODES:-}" ]; then
  across_nodes() { SHOAL_EMULATE_NODES=2 CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER} launch "$@"; }
  run_step "gpu tests, 2 PEs on 2 nodes (emulated)" gpu_tests_2pe_2nodes.log -- across_nodes 2 --timeout 480 -- \
    "$BUILD/bin/shoal_gpu_tests" ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER}
  if grep -q "no proxy transport" "$OUT/gpu_tests_2pe_2nodes.log"; then
    unset 'summary[-1]'
    record "gpu tests, 2 PEs on 2 nodes" skip 0 "no network in this build (see CARRIED_UCX)"
  fi
fi

# Nodes of unequal size: 3 PEs on 2 emulated nodes (2 and 1). same_local_rank_team is each PE alone on every
# PE alike, and the world's all-reduce never takes the hierarchical path on some PEs only (each PE judging
# from its own node once made the lone PE's team the whole world).
if [ "$gpus" -ge 1 ] && [ "${SKIP_TESTS:-0}" != 1 ] && [ "${SKIP_ACROSS_NODES:-0}" != 1 ] && [ -z "${EMULATE_NODES:-}" ]; then
  uneven_nodes() { SHOAL_EMULATE_NODES=2 CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER} launch "$@"; }
  run_step "team tests, 3 PEs on 2 uneven nodes" gpu_tests_3pe_uneven_nodes.log -- uneven_nodes 3 --timeout 300 -- \
    "$BUILD/bin/shoal_gpu_tests" --gtest_filter="${GTEST_FILTER:-CollTeams.*:CollHierarchical.*}"
fi

# The heap in 2 MiB chunks (256 of them at init, more as it grows) under a limit of 256 open files: the
# chunks' descriptors cross between the PEs of a node in batches, not all at once.
if [ "$gpus" -ge 1 ] && [ "${SKIP_TESTS:-0}" != 1 ]; then
  small_chunks() { (ulimit -n 256 && SHOAL_HEAP_SIZE=512M SHOAL_HEAP_CHUNK_SIZE=2M launch "$@"); }
  run_step "heap tests, 2 MiB chunks, 256 files" gpu_tests_small_chunks.log -- small_chunks 2 --timeout 300 -- \
    "$BUILD/bin/shoal_gpu_tests" --gtest_filter="${GTEST_FILTER:-Heap.*:Register.*}"
fi

for example in ring_exchange allreduce halo_exchange moe_dispatch_combine; do
  if [ -x "$BUILD/bin/$example" ] && [ "${SKIP_TESTS:-0}" != 1 ]; then
    run_step "example $example" examples.log -- launch 2 --timeout 60 -- "$BUILD/bin/$example"
  fi
done

# compute-sanitizer over the GPU tier, one run per tool named in SANITIZE (e.g. "memcheck racecheck synccheck";
# 0.5-3 minutes each at 1 PE on an H200), at SANITIZE_PES PEs (default 1). A run passes when the tool
# reports no error and every test passes.
# Tests that make a CUDA call fail on purpose (a file limit that refuses a heap export; a local buffer
# shorter than the copy, which the copy itself refuses): memcheck counts each such call as an error, so
# under memcheck these run in a pass of their own that leaves CUDA API errors unreported (their memory
# accesses are still checked), and the rest run with API errors reported. With GTEST_FILTER set, that pass
# is left out. A renamed test must be renamed here too: the pass would otherwise run nothing, and pass.
fails_cuda_calls_on_purpose='Heap.GrowthThatFailsOnOnePeGrowsNoHeapAndTheNextWorks'
fails_cuda_calls_on_purpose+=':Heap.LocalBufferShorterThanTheCopyIsRefusedAndLeavesNothingBehind'
sanitize_step() {  # sanitize_step TOOL LOG_TAG [compute-sanitizer options] -- [gtest filter]
  local tool=$1 tag=$2 n=${SANITIZE_PES:-1}; shift 2
  local options=(); while [ "$1" != -- ]; do options+=("$1"); shift; done; shift
  run_step "compute-sanitizer $tag, $n PE$(sharing $n)" "sanitize_$tag.log" -- launch "$n" \
    --timeout "${SANITIZE_TIMEOUT:-400}" -- compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 30 \
    "${options[@]}" "$BUILD/bin/shoal_gpu_tests" ${1:+--gtest_filter=$1}
}
for tool in ${SANITIZE:-}; do
  if [ "$gpus" -ge 1 ] && command -v compute-sanitizer > /dev/null; then
    if [ "$tool" = memcheck ]; then
      # A filter that already has a negative part takes the exclusions after a ':'.
      filter=${GTEST_FILTER:-*}; case $filter in *-*) filter+=":" ;; *) filter+="-" ;; esac
      sanitize_step memcheck memcheck -- "$filter$fails_cuda_calls_on_purpose"
      [ -n "${GTEST_FILTER:-}" ] ||
        sanitize_step memcheck memcheck-failing-calls --report-api-errors no -- "$fails_cuda_calls_on_purpose"
    else
      sanitize_step "$tool" "$tool" -- "${GTEST_FILTER:-}"
    fi
  else
    record "compute-sanitizer $tool" skip 0 "no GPU or no compute-sanitizer on PATH"
  fi
done

[ "${SKIP_TESTS:-0}" = 1 ] || [ "${SKIP_PROBES:-0}" = 1 ] || for probe in "bad-pe:device check failed.*pe = 5" "outside-heap:device check failed.*offset from heap base" \
             "misaligned-signal:device check failed.*misaligned by \(bytes\) = 4" \
             "overlong-put:device check failed.*bytes, past the symmetric object" \
             "past-mapped-put:device check failed.*bytes, past the symmetric object" \
             "grid-too-large:device check failed.*grid of 4294967296 threads" \
             "team-after-destroy:device check failed.*team used after destroy" \
             "wait-timeout:timed out after .* waiting for wait_until.*waiting for value == -42$" \
             "vector-timeout:timed out after .* waiting for wait_until_all"; do
  mode=${probe%%:*} pattern=${probe#*:}
  start=$SECONDS
  SHOAL_WAIT_TIMEOUT=0.5 launch 2 --timeout 60 -- "$BUILD/bin/shoal_gpu_debug_probe" "$mode" > "$OUT/probe_$mode.txt" 2>&1
  if grep -Eq "$pattern" "$OUT/probe_$mode.txt"; then record "debug trap: $mode" pass $((SECONDS - start)) "report found"
  else record "debug trap: $mode" FAIL $((SECONDS - start)) "no '$pattern'"; fi
done
# Across (emulated) nodes, in every build: shoal::ll_only on a team that spans nodes traps with a report, and
# a put past the mapped heap is refused by the proxy naming the range. Needs the proxy's network
# (CARRIED_UCX or the system's) to start a world across nodes; skipped without it. The probes below print
# SKIP when their PEs are not across nodes: here that means the emulation failed, so it reads as FAIL.
[ "${SKIP_TESTS:-0}" = 1 ] || [ "${SKIP_PROBES:-0}" = 1 ] || for probe in \
    "ll-only-across-nodes:with shoal::ll_only on a team that spans nodes" \
    "beyond-mapped-across-nodes:put to PE [01] names heap bytes beyond the [0-9]+ mapped" \
    "shared-source-across-nodes:put to PE [01] through the proxy failed: the local buffer is __shared__"; do
  mode=${probe%%:*} pattern=${probe#*:}
  start=$SECONDS
  SHOAL_EMULATE_NODES=2 SHOAL_WAIT_TIMEOUT=5 launch 2 --timeout 60 -- \
    "$BUILD/bin/shoal_gpu_debug_probe" "$mode" > "$OUT/probe_$mode.txt" 2>&1
  if grep -q "no proxy transport" "$OUT/probe_$mode.txt"; then
    record "trap: $mode" skip $((SECONDS - start)) "no network in this build"
  elif grep -Eq "$pattern" "$OUT/probe_$mode.txt"; then
    record "trap: $mode" pass $((SECONDS - start)) "report found"
  else
    record "trap: $mode" FAIL $((SECONDS - start)) "no '$pattern'"
  fi
done
# No misuse: a team destroyed after its world lets go of it (exit 0) instead of freeing into the freed heap.
if [ "$gpus" -ge 1 ] && [ "${SKIP_TESTS:-0}" != 1 ] && [ "${SKIP_PROBES:-0}" != 1 ]; then
  run_step "team outlives its world" "probe_team_outlives_world.txt" -- launch 2 --timeout 60 -- \
    "$BUILD/bin/shoal_gpu_debug_probe" team-outlives-world
fi
# 4 PEs on 2 emulated nodes, PE 1 with fewer hardware work queues than the hierarchical all-reduce needs: a
# forced hierarchical all-reduce is refused on every PE naming PE 1 (exit 0), not on PE 1 alone. Needs UCX.
if [ "$gpus" -ge 1 ] && [ "${SKIP_TESTS:-0}" != 1 ] && [ "${SKIP_PROBES:-0}" != 1 ] && [ "${SKIP_ACROSS_NODES:-0}" != 1 ]; then
  start=$SECONDS
  SHOAL_EMULATE_NODES=2 SHOAL_ALGO_REDUCE=hierarchical CUDA_MODULE_LOADING=EAGER SHOAL_WAIT_TIMEOUT=10 \
    launch 4 --timeout 90 -- "$BUILD/bin/shoal_gpu_debug_probe" work-queues-differ > "$OUT/probe_work_queues.txt" 2>&1
  rc=$?
  if grep -q "no proxy transport" "$OUT/probe_work_queues.txt"; then
    record "work queues differ" skip $((SECONDS - start)) "no network in this build"
  elif [ $rc -eq 0 ]; then record "work queues differ" pass $((SECONDS - start)) "every PE refused naming PE 1"
  else record "work queues differ" FAIL $((SECONDS - start)) "rc=$rc"; fi
fi
cat "$OUT"/probe_*.txt > "$OUT/probes.log" 2>/dev/null && rm -f "$OUT"/probe_*.txt

# A PE that vanishes while the other puts to it across (emulated) nodes: the survivor must get an error
# naming it, within the wait timeout, and the launcher must exit non-zero. Needs UCX (CARRIED_UCX or the
# system's); skipped when the build has no network.
if [ "$gpus" -ge 2 ] && [ "${SKIP_TESTS:-0}" != 1 ] && [ "${SKIP_PROBES:-0}" != 1 ]; then
  start=$SECONDS
  SHOAL_EMULATE_NODES=2 CUDA_MODULE_LOADING=EAGER SHOAL_WAIT_TIMEOUT=20 "$BUILD/bin/shoalrun" -n 2 --timeout 90 -- \
    "$BUILD/bin/shoal_gpu_debug_probe" peer-dies > "$OUT/fault_peer_dies.log" 2>&1
  rc=$?
  if grep -q "no proxy transport" "$OUT/fault_peer_dies.log"; then
    record "fault: peer dies" skip $((SECONDS - start)) "no network in this build"
  elif [ $rc -ne 0 ] && grep -Eq "told after .*PE 1 failed" "$OUT/fault_peer_dies.log"; then
    record "fault: peer dies" pass $((SECONDS - start)) "rc=$rc, $(grep -o 'told after [0-9.]* s' "$OUT/fault_peer_dies.log")"
  else
    record "fault: peer dies" FAIL $((SECONDS - start)) "rc=$rc, no 'told after ... PE 1 failed'"
  fi
fi

if [ -x "$BUILD/bin/shoal-perf" ] && [ "${SKIP_PERF:-0}" != 1 ]; then
  tag=${PERF_TAG:-perf}
  run_step "shoal-perf ${PERF_SUITE:-quick}, ${PERF_PES:-2} PEs$(sharing ${PERF_PES:-2})" "$tag.log" -- launch "${PERF_PES:-2}" \
    --timeout "${PERF_TIMEOUT:-500}" -- \
    "$BUILD/bin/shoal-perf" ${PERF_SUITE:-quick} --json "$OUT/$tag.jsonl" ${PERF_ARGS:-}
fi

echo
echo "=== summary ($gpus GPUs) ==="
printf '%s\n' "${summary[@]}"
