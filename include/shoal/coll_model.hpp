// shoal's cost model of collective algorithms: predicted time = steps x step latency + bytes / bandwidth
// for each collective and algorithm, with the constants of one topology in a coll_model_table. The
// library runs the algorithm with the least predicted time; SHOAL_ALGO_<COLLECTIVE> overrides it, and
// shoal-info prints the choice. Host-side and constexpr. Formulas and calibration: docs/collectives-model.md.
#pragma once

#include <cstdint>
#include <initializer_list>
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
  ring,          // chunks travel neighbour to neighbour: not implemented; modelled across nodes (predict_net)
  hierarchical,  // within nodes, then between same-local-rank PEs: the on-stream all-reduce of the world team
                 // across nodes composes it (not a kernel algorithm); modelled across nodes
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
// defaults are an H100/H200 NVLink node (NVSwitch or a single pair), from ceilings and in-kernel calls
// measured on 2 x H200 (docs/collectives-model.md);
// `shoal-perf --calibrate` measures them on the machine at hand and writes a file (see coll_model file
// format in docs/collectives-model.md).
struct coll_model_table {
  double launch_us = 4.0;              // on-stream kernel launch floor: the same for every algorithm, so never decides
  double step_us = 4.0;                // alpha: one signalled step (data, release fence, flag seen by the peer)
  double ll_step_us = 2.3;             // alpha_ll: one flag-in-data step (a flag store seen by a peer, no fence)
  double link_gbps = 365.0;            // beta: one GPU's NVLink bandwidth each way with SM copies, all peers together
  double ll_link_gbps = 330.0;         // beta_ll: rate of LL lines (half data, half flags) a GPU sends
  double local_gbps = 3900.0;          // gamma: local HBM traffic (bytes read + written) of copies and reductions
  double chunk_bytes = 2048.0 * 1024;  // bytes one staged step carries to a peer, all channels together
                                       // (team channels x SHOAL_TEAM_SCRATCH_BYTES); an LL step carries half

  // Between nodes: the scale model (predict_net, docs/scale-model.md). Nothing above reads these, so they
  // never change the choice within a node. Defaults: one 400 Gb/s RDMA NIC (ConnectX-7) per GPU, driven by
  // shoal's proxy thread; the latencies and the per-message gap are assumptions until measured.
  double nic_gbps = 46.0;    // beta_net: one GPU's NIC each way: 50 GB/s line rate x 0.92
  double net_step_us = 3.0;  // wire part of alpha_net: doorbell to the data and its signal seen by the peer GPU
  double net_post_us = 2.5;  // issue part of alpha_net: the GPU's request to the NIC's doorbell, via the proxy
  double net_msg_us = 0.25;  // g: the sender's gap between two network messages (one proxy thread posts them)
  int gpus_per_node = 8;     // the node shape the scale model assumes when it is given none
  int nodes = 16;
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
        // direct: each PE reads its block from every peer's source over the links; locally it reads its
        // own block and writes the result.
        case algorithm::direct:
          return serial(2, peers * s, 2 * s);
        default:
          break;
      }
      break;
  }
  return {};
}

// Steps of an algorithm's terms, counting one per scratch-full (chunk_bytes; LL: half) when it is staged.
constexpr double steps_of(const coll_model_table& t, const cost_terms& c) {
  if (!c.staged) return c.steps;
  const double per_step = c.ll ? t.chunk_bytes / 2 : t.chunk_bytes;
  const double quotient = c.stage_bytes / per_step;
  // Rounded up. From 2^53 every double is whole (and a cast to an integer could overflow): it stands.
  double needed = quotient;
  if (quotient < 9007199254740992.0) {
    const double whole = static_cast<double>(static_cast<std::uint64_t>(quotient));
    needed = whole < quotient ? whole + 1 : whole;
  }
  return needed > c.steps ? needed : c.steps;
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
  const double steps = steps_of(table, t);
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

// ---------------------------------------------------------------------------------------------------------
// Across nodes: the scale model. It predicts collectives on teams that span nodes, with the network
// constants of coll_model_table, for docs/scale-model.md and `shoal-info --scale-model`. model_choice,
// supports() and the team thresholds above stay the within-node model; the one runtime use of the network
// terms is the choice between the flat and the hierarchical on-stream all-reduce (src/coll/hierarchical.hpp).
// `modelled` says what the scale model can predict; `supports` (what kernels implement) is unchanged.

// A team of gpus_per_node PEs on each of `nodes` nodes, one PE per GPU and one NIC per GPU.
struct node_shape {
  int gpus_per_node = 8;
  int nodes = 1;
  constexpr int n_pes() const { return gpus_per_node * nodes; }
};

// The all-reduce between nodes inside `hierarchical` (among the k PEs of one local rank, over their NICs).
enum class net_algorithm {
  none,                // not hierarchical
  ring,                // 2(k-1) steps, 2(k-1)/k of the data each way
  recursive_doubling,  // log2 k steps, the whole data each step: fewest steps
  halving_doubling,  // recursive halving reduce-scatter then doubling all-gather: 2 log2 k steps, 2(k-1)/k of the data
};

constexpr std::string_view to_string(net_algorithm a) {
  constexpr std::string_view kNames[] = {"none", "ring", "recursive_doubling", "halving_doubling"};
  return kNames[static_cast<int>(a)];
}

// One prediction of the scale model: the algorithm, its time inside a kernel (add table.launch_us on a
// stream) and, for hierarchical, how it runs.
struct net_prediction {
  algorithm algo = algorithm::one_shot;
  double us = std::numeric_limits<double>::infinity();
  net_algorithm between = net_algorithm::none;  // hierarchical all-reduce: the all-reduce between nodes
  int chunks = 1;                               // hierarchical: pipeline chunks
};

// The most chunks a hierarchical call is modelled with (a fixed set keeps the prediction monotone in size).
inline constexpr int kMaxPipelineChunks = 1024;

// Whether the scale model predicts `algo` for `op` on a team of this shape. On one node: what shoal
// implements. Across nodes: the flat forms of the implemented algorithms except ll (the network moves whole
// messages, so flags inside the data save nothing there), ring for all-reduce (rail-aligned, as NCCL's
// ring), hierarchical for all-reduce and alltoall. Of these shoal runs the flat ones and (on a stream,
// pipelined in chunks) the hierarchical all-reduce; ring and hierarchical alltoall are not implemented.
constexpr bool modelled(collective op, algorithm algo, node_shape shape) {
  if (shape.nodes <= 1) return supports(op, algo);
  switch (algo) {
    case algorithm::ll:
      return false;
    case algorithm::ring:
      return op == collective::reduce;
    case algorithm::hierarchical:
      return op == collective::reduce || op == collective::alltoall;
    default:
      return supports(op, algo);
  }
}

namespace net_model_detail {

inline constexpr double kBytesPerUsPerGbps = 1e3;

constexpr double max2(double a, double b) { return a < b ? b : a; }

// alpha_net: one signalled network step, issue and wire.
constexpr double alpha_net(const coll_model_table& t) { return t.net_post_us + t.net_step_us; }

// A NIC moving `bytes` in `messages` messages: bandwidth or the sender's message gap, whichever binds.
constexpr double nic_busy_us(const coll_model_table& t, double bytes, double messages) {
  return max2(bytes / (t.nic_gbps * kBytesPerUsPerGbps), messages * t.net_msg_us);
}

// A within-node phase: the within-node model's best algorithm for `op` on n PEs.
constexpr double node_phase_us(const coll_model_table& t, collective op, int n, std::uint64_t bytes) {
  return predict_us(t, op, model_choice(t, op, n, bytes), n, bytes);
}

// Flat: the within-node algorithm run over the whole team. Of each PE's remote bytes, those for its
// (n - m) peers on other nodes cross its NIC, the rest NVLink, at the same time; every step is a network
// step and carries one message to each peer off the node.
constexpr double flat_us(const coll_model_table& t, collective op, algorithm algo, node_shape shape,
                         std::uint64_t bytes) {
  const int n = shape.n_pes();
  const cost_terms c = coll_cost_terms(op, algo, n, bytes);
  if (!c.supported || c.ll) return std::numeric_limits<double>::infinity();
  const double steps = steps_of(t, c);
  const double off_node = n - shape.gpus_per_node;
  const double net_bytes = c.remote_bytes * off_node / (n - 1);
  const double nvlink_us = (c.remote_bytes - net_bytes) / (t.link_gbps * kBytesPerUsPerGbps);
  return steps * alpha_net(t) + max2(nvlink_us, nic_busy_us(t, net_bytes, steps * off_node)) +
         c.local_bytes / (t.local_gbps * kBytesPerUsPerGbps);
}

// Flat ring all-reduce, rail-aligned as NCCL builds it: m rings, each leaving a node through a different
// GPU's NIC, so a NIC carries 1/m of the ring traffic and NVLink the rest. 2(n-1) steps, each as slow as
// its network hop.
constexpr double ring_us(const coll_model_table& t, node_shape shape, std::uint64_t bytes) {
  const double n = shape.n_pes();
  const double m = shape.gpus_per_node;
  const double s = static_cast<double>(bytes);
  const double moved = 2 * (n - 1) / n * s;  // each PE sends (and receives) this much
  const double steps = 2 * (n - 1);
  return steps * alpha_net(t) +
         max2(moved * (m - 1) / m / (t.link_gbps * kBytesPerUsPerGbps), nic_busy_us(t, moved / m, steps)) +
         3 * (n - 1) / n * s / (t.local_gbps * kBytesPerUsPerGbps);
}

// The all-reduce of s bytes between k nodes (k >= 2), one PE per node: the steps' latency (`wait`) and the
// time the NIC and the reductions are busy (`busy`). A k that is not a power of two costs recursive doubling
// and halving-doubling one step (and s bytes) before and one after, folding the extra PEs in and out.
struct between_nodes_us {
  double wait = 0;
  double busy = 0;
};

constexpr between_nodes_us between_nodes(const coll_model_table& t, net_algorithm a, int k, double s) {
  int p2 = 1, lg = 0;
  while (p2 * 2 <= k) {
    p2 *= 2;
    ++lg;
  }
  const double fold = p2 == k ? 0 : 2;
  double steps = 0, sent = 0, reduced = 0;
  switch (a) {
    case net_algorithm::ring:
      steps = 2.0 * (k - 1);
      sent = 2.0 * (k - 1) / k * s;
      reduced = (k - 1.0) / k * s;
      break;
    case net_algorithm::recursive_doubling:
      steps = lg + fold;
      sent = (lg + fold) * s;
      reduced = (lg + fold / 2) * s;
      break;
    case net_algorithm::halving_doubling:
      steps = 2.0 * lg + fold;
      sent = (2.0 * (p2 - 1) / p2 + fold) * s;
      reduced = ((p2 - 1.0) / p2 + fold / 2) * s;
      break;
    case net_algorithm::none:
      return {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  }
  // A reduction reads two operands and writes one.
  return {steps * alpha_net(t), nic_busy_us(t, sent, steps) + 3 * reduced / (t.local_gbps * kBytesPerUsPerGbps)};
}

// Hierarchical all-reduce, pipelined in P chunks: reduce-scatter within the node (NVLink), all-reduce of
// each PE's 1/m between the nodes (NIC), all-gather within the node (NVLink). The first chunk goes through
// all three phases (fill and drain); after it, one chunk leaves every max(NVLink phases, NIC busy). The two
// NVLink phases share the GPU's links and SMs, so they add; the network's step latency overlaps with the
// chunks in flight, its busy time does not. The best P (a power of two) and between-node algorithm win.
constexpr net_prediction hierarchical_reduce(const coll_model_table& t, node_shape shape, std::uint64_t bytes) {
  const int m = shape.gpus_per_node;
  net_prediction best{algorithm::hierarchical};
  for (int chunks = 1; chunks <= kMaxPipelineChunks; chunks *= 2) {
    const std::uint64_t per = static_cast<std::uint64_t>(chunks) * m;
    const std::uint64_t block = (bytes + per - 1) / per;  // each PE's share of one chunk
    const double node_us =
        node_phase_us(t, collective::reducescatter, m, block) + node_phase_us(t, collective::fcollect, m, block);
    for (net_algorithm a : {net_algorithm::ring, net_algorithm::recursive_doubling, net_algorithm::halving_doubling}) {
      const between_nodes_us net = between_nodes(t, a, shape.nodes, static_cast<double>(block));
      const double us = node_us + net.wait + net.busy + (chunks - 1) * max2(node_us, net.busy);
      if (us < best.us) best = {algorithm::hierarchical, us, a, chunks};
    }
  }
  return best;
}

// Hierarchical alltoall (rail-aligned): within the node each PE hands a local peer the k blocks bound for
// that peer's local rank on every node (an alltoall among m PEs with blocks k·S); then each PE sends every
// same-local-rank PE on another node the m blocks it gathered for it, one message per node. The NIC
// carries the same (n - m)·S bytes as flat, in k - 1 messages instead of n - m. Pipelined as above.
constexpr net_prediction hierarchical_alltoall(const coll_model_table& t, node_shape shape, std::uint64_t bytes) {
  const int m = shape.gpus_per_node;
  const int k = shape.nodes;
  net_prediction best{algorithm::hierarchical};
  for (int chunks = 1; chunks <= kMaxPipelineChunks; chunks *= 2) {
    const std::uint64_t piece = (bytes + chunks - 1) / chunks;  // of each block, one chunk's part
    const double node_us = node_phase_us(t, collective::alltoall, m, piece * k);
    const double net_busy = nic_busy_us(t, static_cast<double>(piece) * m * (k - 1), k - 1);
    const double us = node_us + alpha_net(t) + net_busy + (chunks - 1) * max2(node_us, net_busy);
    if (us < best.us) best = {algorithm::hierarchical, us, net_algorithm::none, chunks};
  }
  return best;
}

}  // namespace net_model_detail

// Predicted time of `algo` for `op` on a team of this shape, inside a kernel; `bytes` counts as in
// coll_cost_terms. On one node it is exactly predict_us on gpus_per_node PEs. Infinity where not modelled.
constexpr net_prediction predict_net(const coll_model_table& table, collective op, algorithm algo, node_shape shape,
                                     std::uint64_t bytes) {
  namespace d = net_model_detail;
  if (shape.nodes <= 1) return {algo, predict_us(table, op, algo, shape.gpus_per_node, bytes)};
  if (!modelled(op, algo, shape)) return {algo};
  switch (algo) {
    case algorithm::hierarchical:
      return op == collective::reduce ? d::hierarchical_reduce(table, shape, bytes)
                                      : d::hierarchical_alltoall(table, shape, bytes);
    case algorithm::ring:
      return {algo, d::ring_us(table, shape, bytes)};
    default:
      return {algo, d::flat_us(table, op, algo, shape, bytes)};
  }
}

// The modelled algorithm with the least predicted time (the earlier in `algorithm` order on a tie). On one
// node, model_choice's. Never used to run a collective: the scale model's choice, for the docs and tools.
constexpr net_prediction net_model_choice(const coll_model_table& table, collective op, node_shape shape,
                                          std::uint64_t bytes) {
  net_prediction best;
  for (int i = 0; i < kAlgorithmCount; ++i) {
    const net_prediction p = predict_net(table, op, static_cast<algorithm>(i), shape, bytes);
    if (p.us < best.us) best = p;
  }
  return best;
}

// Bus bandwidth in GB/s as nccl-tests counts it, for `bytes` (coll_cost_terms' count) in `us` on n PEs:
// all-reduce 2(n-1)/n·S, fcollect, alltoall and reduce-scatter (n-1)·S, broadcast S, each over the time.
constexpr double bus_gbps(collective op, int n_pes, std::uint64_t bytes, double us) {
  const double n = n_pes;
  const double s = static_cast<double>(bytes);
  double moved = 0;
  switch (op) {
    case collective::reduce:
      moved = 2 * (n - 1) / n * s;
      break;
    case collective::fcollect:
    case collective::alltoall:
    case collective::reducescatter:
      moved = (n - 1) * s;
      break;
    case collective::broadcast:
      moved = s;
      break;
    case collective::barrier:
      break;
  }
  return moved / (us * net_model_detail::kBytesPerUsPerGbps);
}

// The table with the NIC driven from the GPU (IBGDA-style: GPU threads write the work requests and ring
// the doorbell, no proxy thread): the issue part of a step and the per-message gap shrink; the wire does
// not change. Assumed figures, explained in docs/scale-model.md.
constexpr coll_model_table gpu_initiated_network(coll_model_table table) {
  table.net_post_us = 0.5;  // a work request written to the NIC's queue and one doorbell write over PCIe
  table.net_msg_us = 0.02;  // warps post on their own queue pairs, in parallel: 50 million messages/s per GPU
  return table;
}

}  // namespace shoal
