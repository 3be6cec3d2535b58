#!/usr/bin/env bash
# A/B of shoal-perf rows: BASE (a git ref) against the working tree. Both are built side by side
# (shoal-perf and shoalrun only) and run in alternation, ROUNDS times each, so that drift between runs falls
# on both alike. Prints, per row, each side's median time and new / base. With more PEs than GPUs the PEs
# share them under MPS (scripts/gpu-sharing.sh): good for SM-side changes (how a loop loads, stores and
# waits), blind to the links (docs/perf-notes.md, entry 49).
# Usage: scripts/perf-ab.sh BASE SHOAL_PERF_ARGS...   e.g.
#   scripts/perf-ab.sh HEAD~1 coll --colls reduce --modes block --sizes 4K,1M --no-nccl
# BASE is a git ref, or a source tarball (`git archive REF > base.tar`) for a copy of the tree without its
# git history; BASE_LABEL then names it in the rows (default: the file's name), and NEW_LABEL names the
# working tree (default: HEAD's commit, which a copied tree may not match).
# Knobs: PES (default 2), ROUNDS (default 3), OUT (logs, JSON and the table; default out/ab), JOBS (build
# jobs per side), CMAKE_ARGS (extra configure arguments for both sides, e.g. -DCMAKE_PREFIX_PATH=...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
if [ $# -lt 2 ]; then
  sed -n '2,13p' "$0"
  exit 2
fi
base=$1
shift
if [ -f "$base" ]; then
  base_commit=${BASE_LABEL:-$(basename "$base")}
else
  base_commit=$(git rev-parse --short=12 "$base^{commit}")
fi
if [ -n "${NEW_LABEL:-}" ]; then
  new_commit=$NEW_LABEL
elif git rev-parse -q --verify HEAD > /dev/null 2>&1; then
  new_commit="$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- || echo -dirty)"
else
  new_commit="${SHOAL_COMMIT:-unknown}-tree"
fi
PES=${PES:-2} ROUNDS=${ROUNDS:-3} OUT=${OUT:-out/ab}
JOBS=${JOBS:-$(( ($(nproc) + 1) / 2 ))}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -lt 1 ]; then
  echo "perf-ab: no GPU here (nvidia-smi -L lists none)" >&2
  exit 1
fi
mkdir -p "$OUT"
work=$(mktemp -d /tmp/shoal-ab.XXXXXX)

# Each side: shoal-perf and shoalrun, Release, without NVSHMEM (NCCL stays when the machine has it).
build() {  # side source_dir
  cmake -G Ninja -S "$2" -B "$work/$1" -DCMAKE_BUILD_TYPE=Release -DSHOAL_BUILD_TESTS=OFF \
    -DSHOAL_BUILD_EXAMPLES=OFF -DSHOAL_WITH_NVSHMEM=OFF ${CMAKE_ARGS:-} > "$OUT/build_$1.log" 2>&1 &&
    ninja -C "$work/$1" -j "$JOBS" shoal-perf shoalrun >> "$OUT/build_$1.log" 2>&1
}
mkdir -p "$work/base-src"
if [ -f "$base" ]; then tar -xf "$base" -C "$work/base-src"; else git archive "$base_commit" | tar -x -C "$work/base-src"; fi
echo "perf-ab: building base $base_commit and new $new_commit (logs in $OUT)"
build base "$work/base-src" & base_build=$!
build new "$PWD" & new_build=$!
wait "$base_build" || { echo "perf-ab: the base build failed: $OUT/build_base.log" >&2; exit 1; }
wait "$new_build" || { echo "perf-ab: the new build failed: $OUT/build_new.log" >&2; exit 1; }

SHOALRUN=$work/new/bin/shoalrun  # one launcher for both sides
source scripts/gpu-sharing.sh
trap 'mps_stop; rm -rf "$work"' EXIT
mps_start_for "$PES"
for round in $(seq "$ROUNDS"); do
  for side in base new; do
    commit=$base_commit
    [ "$side" = new ] && commit=$new_commit
    if ! SHOAL_COMMIT=$commit launch "$PES" --timeout "${TIMEOUT:-900}" -- "$work/$side/bin/shoal-perf" "$@" \
      --json "$OUT/${side}_$round.jsonl" > "$OUT/${side}_$round.log" 2>&1; then
      echo "perf-ab: $side, round $round failed: $OUT/${side}_$round.log" >&2
      exit 1
    fi
  done
  echo "perf-ab: round $round of $ROUNDS done"
done

echo "perf-ab: $PES PEs on $gpus GPU(s)$(sharing "$PES"), base $base_commit, new $new_commit, $ROUNDS rounds"
python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/table.txt"
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
times, failed = {}, set()
for side in ("base", "new"):
    for r in range(1, rounds + 1):
        try:
            lines = open(f"{out}/{side}_{r}.jsonl").readlines()
        except FileNotFoundError:
            sys.exit(f"perf-ab: {side}, round {r} wrote no rows (the suite skipped?): see {out}/{side}_{r}.log")
        for line in lines:
            row = json.loads(line)
            key = (row["op"], row["scope"], row["bytes"], row["ctas"], row["threads"])
            if row["status"] != "ok":
                failed.add(key)
            if row.get("time_us") is not None:
                times.setdefault(key, {}).setdefault(side, []).append(row["time_us"])
print(f"{'op':<22} {'scope':<7} {'bytes':>10} {'shape':>10} {'base_us':>9} {'new_us':>9} {'new/base':>8}  spread base | new")
for key in sorted(times):
    sides = times[key]
    if "base" not in sides or "new" not in sides:
        continue
    b, n = statistics.median(sides["base"]), statistics.median(sides["new"])
    shape = f"{key[3]}x{key[4]}" if key[3] else "-"
    spread = lambda v: f"{min(v):.2f}-{max(v):.2f}"
    flag = "  (a status not ok: see the logs)" if key in failed else ""
    print(f"{key[0]:<22} {key[1]:<7} {key[2]:>10} {shape:>10} {b:>9.2f} {n:>9.2f} {n / b:>8.3f}  {spread(sides['base'])} | {spread(sides['new'])}{flag}")
PY
