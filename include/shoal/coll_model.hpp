// shoal's cost model of collective algorithms: predicted time = steps x step latency + bytes / bandwidth
// for each collective and algorithm, with the constants of one topology in a coll_model_table. The
// library runs the algorithm with the least predicted time; SHOAL_ALGO_<COLLECTIVE> overrides it, and
// shoal-info prints the choice. Host-side and constexpr. Formulas and calibration: docs/collectives-model.md.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace shoal {

enum class collective { barrier, broadcast, fcollect, alltoall, reduce, reducescatter };
inline constexpr int kCollectiveCount = 6;

// Listed in the order of the message sizes they suit; on equal predicted time the earlier one wins.
enum class algorithm {
  ll,            // one step; every 8-byte word travels with its flag, so no fence and no separate signal
  one_shot,      // one signalled step: each PE stages its contribution in every peer's team scratch
  two_shot,      // all-reduce between two meetings: reduce 1/n from the peers' sources, write it everywhere
  direct,        // straight into the users' buffers between an entry and an exit meeting
  ring,          // chunks travel neighbour to neighbour: not implemented (supports() is false)
  hierarchical,  // within nodes, then between same-local-rank PEs: not implemented yet
};
inline constexpr int kAlgorithmCount = 6;

constexpr std::string_view to_string(collective c) {
  constexpr std::string_view kNames[] = {"barrier", "broadcast", "fcollect", "alltoall", "reduce", "reducescatter"};
  return kNames[static_cast<int>(c)];
}

constexpr std::string_view to_string(algorithm a) {
  constexpr std::string_view kNames[] = {"ll", "one_shot", "two_shot", "direct", "ring", "hierarchical"};
  return kNames[static_cast<int>(a)];
}

constexpr std::optional<algorithm> algorithm_from_string(std::string_view name) {
  for (int i = 0; i < kAlgorithmCount; ++i)
    if (to_string(static_cast<algorithm>(i)) == name) return static_cast<algorithm>(i);
  return std::nullopt;
}

// The constants of one topology. Bandwidths are in GB/s (1e9 bytes/s), times in microseconds. The
// defaults are an H100/H200 NVLink node (NVSwitch or a single pair), from the ceilings measured on 2 x H200 (docs/collectives-model.md);
// `shoal-perf --calibrate` measures them on the machine at hand and writes a file (see coll_model file
// format in docs/collectives-model.md).
struct coll_model_table {
  double launch_us = 4.0;             // on-stream kernel launch floor: the same for every algorithm, so never decides
  double step_us = 1.0;               // alpha: one signalled step (data, release fence, flag seen by the peer)
  double ll_step_us = 0.6;            // alpha_ll: one flag-in-data step (a flag store seen by a peer, no fence)
  double link_gbps = 365.0;           // beta: one GPU's NVLink bandwidth each way with SM copies, all peers together
  double ll_link_gbps = 120.0;        // beta_ll: rate of LL lines (half data, half flags) a GPU sends
  double local_gbps = 3900.0;         // gamma: local HBM traffic (bytes read + written) of copies and reductions
  double chunk_bytes = 1024.0 * 1024;  // bytes one staged step carries to a peer, all channels together
                                       // (team channels x SHOAL_TEAM_SCRATCH_BYTES); an LL step carries half
};

// The size-dependent parts of one algorithm's cost, before the table's constants are applied. Bytes are
// those of the busiest PE; links are full duplex, so sending and receiving overlap and count once.
struct cost_terms {
  bool supported = false;   // false: the algorithm does not implement this collective
  bool ll = false;          // steps cost ll_step_us and remote bytes move at ll_link_gbps
  bool staged = false;      // data passes through the team's scratch: one step per chunk_bytes (LL: half)
  double steps = 0;         // synchronization steps on the critical path (staged: at least this many)
  double remote_bytes = 0;  // bytes over links (LL: data and flags)
  double local_bytes = 0;   // local memory traffic: reads + writes of reductions, unpacking, own-block copies
  double stage_bytes = 0;   // staged: bytes a member sends one peer through scratch
};

// Terms for `op` on a team of `n_pes` (>= 1) PEs. `bytes` is OpenSHMEM's nelems x element size:
// broadcast and reduce: the buffer; fcollect: each PE's contribution; alltoall: one block, one PE to one
// PE; reducescatter: each PE's result block; barrier: ignored.
constexpr cost_terms coll_cost_terms(collective op, algorithm algo, int n_pes, std::uint64_t bytes) {
  const double n = n_pes;
  const double s = static_cast<double>(bytes);
  const double peers = n - 1;
  auto serial = [](double steps, double remote, double local) {
    return cost_terms{true, false, false, steps, remote, local, 0};
  };
  // LL and one_shot pass each member's `s` bytes to a peer through scratch.
  auto ll = [s](double remote, double local) { return cost_terms{true, true, true, 1, remote, local, s}; };
  auto staged = [s](double remote, double local) { return cost_terms{true, false, true, 1, remote, local, s}; };
  // Each case lists the algorithms shoal implements for the collective (see shoal/dev/coll/*.cuh).
  // one_shot stages data through the team's scratch in one signalled step; direct and two_shot work on
  // the users' buffers between an entry and an exit meeting (two steps).
  switch (op) {
    case collective::barrier:  // each PE signals every peer
      if (algo == algorithm::one_shot) return serial(1, 0, 0);
      break;
    case collective::broadcast:  // the root is the busiest PE
      switch (algo) {
        case algorithm::ll:
          return ll(2 * peers * s, 3 * s);  // receivers unpack 2S of lines into S
        case algorithm::one_shot:
          return staged(peers * s, 2 * s);  // receivers copy the staged S into dst
        case algorithm::direct:
          return serial(2, peers * s, 0);
        default:
          break;
      }
      break;
    case collective::fcollect:
    case collective::alltoall:  // send a block to every peer, copy the own block (2S)
      switch (algo) {
        case algorithm::ll:
          return ll(2 * peers * s, 3 * peers * s + 2 * s);
        case algorithm::one_shot:
          return staged(peers * s, 2 * s + 2 * peers * s);  // and unpack each staged block
        case algorithm::direct:
          return serial(2, peers * s, 2 * s);
        default:
          break;
      }
      break;
    case collective::reduce:
      switch (algo) {
        // Every PE receives every peer's whole buffer and reduces n buffers into one: (n + 1)S locally.
        case algorithm::ll:
          return ll(2 * peers * s, (2 * peers + 2) * s);
        case algorithm::one_shot:
          return staged(peers * s, (n + 1) * s);
        // Reduce-scatter then all-gather: 2(n-1)/n S each way; a PE reduces only its S/n share.
        case algorithm::two_shot:
          return serial(2, 2 * peers / n * s, (n + 1) / n * s);
        default:
          break;
      }
      break;
    case collective::reducescatter:
      switch (algo) {
        case algorithm::ll:
          return ll(2 * peers * s, (2 * peers + 2) * s);
        case algorithm::one_shot:
          return staged(peers * s, (n + 1) * s);
        case algorithm::direct:  // each PE reads its block from every peer's source
          return serial(2, peers * s, (n + 1) * s);
        default:
          break;
      }
      break;
  }
  return {};
}

// Predicted time in microseconds of one call inside a kernel (add table.launch_us for the on-stream
// form); infinity when the algorithm does not implement the collective.
//   serial:  steps x alpha + remote / beta + local / gamma
//   staged:  ceil(stage / chunk) x alpha + remote / beta + local / gamma
//   LL:      ceil(stage / (chunk / 2)) x alpha_ll + remote / beta_ll + local / gamma
constexpr double predict_us(const coll_model_table& table, collective op, algorithm algo, int n_pes,
                            std::uint64_t bytes) {
  const cost_terms t = coll_cost_terms(op, algo, n_pes, bytes);
  if (!t.supported) return std::numeric_limits<double>::infinity();
  constexpr double kBytesPerUsPerGbps = 1e3;
  const double beta = table.link_gbps * kBytesPerUsPerGbps;
  const double gamma = table.local_gbps * kBytesPerUsPerGbps;
  const double local_us = t.local_bytes / gamma;
  double steps = t.steps;
  if (t.staged) {
    const double per_step = t.ll ? table.chunk_bytes / 2 : table.chunk_bytes;
    const double needed = static_cast<double>(static_cast<std::uint64_t>((t.stage_bytes + per_step - 1) / per_step));
    if (needed > steps) steps = needed;
  }
  if (t.ll) return steps * table.ll_step_us + t.remote_bytes / (table.ll_link_gbps * kBytesPerUsPerGbps) + local_us;
  return steps * table.step_us + t.remote_bytes / beta + local_us;
}

// The algorithm with the least predicted time (the earlier in `algorithm` order on a tie).
constexpr algorithm model_choice(const coll_model_table& table, collective op, int n_pes, std::uint64_t bytes) {
  algorithm best = algorithm::one_shot;
  double best_us = std::numeric_limits<double>::infinity();
  for (int i = 0; i < kAlgorithmCount; ++i) {
    const double us = predict_us(table, op, static_cast<algorithm>(i), n_pes, bytes);
    if (us < best_us) {
      best_us = us;
      best = static_cast<algorithm>(i);
    }
  }
  return best;
}

constexpr bool supports(collective op, algorithm algo) { return coll_cost_terms(op, algo, 2, 1).supported; }

}  // namespace shoal
