// Output of a run: the aligned table PE 0 prints as rows arrive, the JSON Lines file (one object per row,
// with the run's header fields on every row, flushed per row so a crash keeps what was measured), and the
// summary at the end. Only PE 0 prints and writes; the other PEs keep the rows too, so every PE ends with
// the same failure count.
#pragma once

#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness.hpp"

namespace shoal::perf {

// Fields every JSON row carries.
struct run_info {
  std::string suite;
  std::string machine;
  std::string date;  // UTC, ISO 8601
  std::string commit;
  std::string shoal_version;
  std::string nccl_version;  // "" without NCCL
  std::string nvshmem_version;  // "" without NVSHMEM
  int n_pes = 0;
  double launch_floor_us = kNaN;
  int warmup = 0, reps = 0;
  bool rotate = true;
  bool quiet_each = false;
  bool pes_share_gpus = false;  // then no target is judged: TARGETS.md's figures are for a GPU per PE
};

// "8", "4K", "1M", "1G" (binary units) when exact, else the byte count.
std::string format_bytes(std::uint64_t bytes);

// Rows of the collectives (op: reduce, reducescatter, fcollect, alltoall, broadcast, barrier). Their
// bandwidth_gbs is NCCL's algorithm bandwidth (nccl-tests' size / time); the bus bandwidth is that times
// bus_factor: all-reduce 2(n-1)/n; all-gather (fcollect), reduce-scatter and alltoall (n-1)/n;
// broadcast 1; NaN for a barrier and for rows that are not collectives. The machine's ceiling applies to
// the bus bandwidth (what one GPU's links carry).
bool is_collective_op(std::string_view op);
double bus_factor(std::string_view op, int n_pes);

// quick's best-of rows (one operation and size over a few launch shapes): the index of the candidate to
// report. A failed check wins, so it is seen; then the highest bandwidth at or below the candidates'
// ceiling. One above the ceiling is no result and is passed over unless every candidate is, so one broken
// configuration does not void the row. `candidates` is not empty.
std::size_t best_candidate(std::span<const row> candidates);

// Column sets of a section: point-to-point RMA, or collectives (model's algorithm, bus bandwidth).
enum class table_layout { rma, coll };

class reporter {
 public:
  // `pe` is this process's PE: only PE 0 prints and opens the JSON file (truncating it); throws
  // std::runtime_error when it cannot.
  reporter(int pe, run_info info, const std::string& json_path);
  ~reporter();
  reporter(const reporter&) = delete;
  reporter& operator=(const reporter&) = delete;

  void header() const;                        // the run's facts, launch floor included
  // A heading and the column titles; with_targets adds the target and pass/miss columns.
  void section(std::string_view title, bool with_targets = false, table_layout layout = table_layout::rma);
  void note(std::string_view text) const;     // a free line under the current section (PE 0)
  // Sets status (ok / FAILED / measurement error) and verdict, prints the row, appends it to the JSON file.
  void add(row r);
  void summary() const;                       // best figures per size and op, latencies, verdicts, failures

  const std::vector<row>& rows() const { return rows_; }
  const run_info& info() const { return info_; }
  int failures() const;  // rows whose shoal, NCCL or NVSHMEM check failed
  int measurement_errors() const;  // rows whose own figure was above the ceiling (a peer's: peer_figure)

 private:
  bool printing_;
  run_info info_;
  std::FILE* json_ = nullptr;
  bool with_targets_ = false;
  table_layout layout_ = table_layout::rma;
  std::vector<row> rows_;

  void coll_summary() const;
};

}  // namespace shoal::perf
