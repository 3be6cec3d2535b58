# Sourced by scripts/device-check.sh and scripts/perf-ab.sh: runs shoalrun jobs with more PEs than GPUs.
# Without MPS the processes on one GPU take turns on it (time slices of milliseconds), so every wait on a
# peer costs a slice. A private MPS daemon lets them run at once; each PE is held to its share of the SMs
# so that kernels waiting for a peer cannot fill the SMs the peer's kernels need. See
# docs/getting-started.md, "More PEs than GPUs".
# Needs: $gpus (GPUs on this machine), $OUT (where the daemon's log goes at the end), $SHOALRUN (the
# launcher). Knob: MPS=0 never starts a daemon. The caller stops the daemon: trap mps_stop EXIT.

mps_dir=""

# Starts the private MPS daemon once; without nvidia-cuda-mps-control, or with MPS=0, does nothing.
mps_start() {
  [ "${MPS:-auto}" != 0 ] && [ -z "$mps_dir" ] && command -v nvidia-cuda-mps-control > /dev/null || return 0
  mps_dir=$(mktemp -d /tmp/shoal-mps.XXXXXX)
  mkdir -p "$mps_dir/pipe" "$mps_dir/log"
  if ! CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe CUDA_MPS_LOG_DIRECTORY=$mps_dir/log nvidia-cuda-mps-control -d; then
    echo "MPS did not start; PEs sharing a GPU will take turns on it" >&2
    rm -rf "$mps_dir"
    mps_dir=""
    return 0
  fi
}

mps_stop() {
  [ -n "$mps_dir" ] || return 0
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe nvidia-cuda-mps-control > /dev/null 2>&1
  cat "$mps_dir"/log/*.log > "$OUT/mps.log" 2>/dev/null
  rm -rf "$mps_dir"
  mps_dir=""
}

pes_per_gpu() { echo $(( ($1 + gpus - 1) / (gpus > 0 ? gpus : 1) )); }

# Starts MPS when a job of `most_pes` PEs would put more than one on a GPU.
mps_start_for() { [ "$gpus" -ge 1 ] && [ "$(pes_per_gpu "$1")" -gt 1 ] && mps_start; return 0; }

# launch N args...: shoalrun -n N args... with the environment for N PEs on this machine's GPUs. A client of
# MPS gets 2 hardware work queues unless CUDA_DEVICE_MAX_CONNECTIONS says otherwise: too few for the
# hierarchical all-reduce's streams beside the proxy's, so jobs across emulated nodes ask for 4
# (docs/proxy-design.md, "Hardware work queues").
launch() {
  local n=$1
  shift
  local per_gpu
  per_gpu=$(pes_per_gpu "$n")
  if [ "$per_gpu" -gt 1 ] && [ -n "$mps_dir" ]; then
    local queues=${CUDA_DEVICE_MAX_CONNECTIONS:-}
    [ -z "$queues" ] && [ -n "${SHOAL_EMULATE_NODES:-}" ] && queues=4
    env CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$((100 / per_gpu)) \
      ${queues:+CUDA_DEVICE_MAX_CONNECTIONS=$queues} "$SHOALRUN" -n "$n" "$@"
  else
    "$SHOALRUN" -n "$n" "$@"
  fi
}

# ", K per GPU (MPS)" or ", K per GPU (turns)" when N PEs share this machine's GPUs; nothing otherwise.
sharing() {
  local per_gpu
  per_gpu=$(pes_per_gpu "$1")
  [ "$per_gpu" -le 1 ] && return 0
  if [ -n "$mps_dir" ]; then echo ", $per_gpu per GPU (MPS)"; else echo ", $per_gpu per GPU (turns)"; fi
}
