#include "nccl_peer.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "coll.hpp"
#include "shoal/bootstrap.hpp"

#ifdef SHOAL_PERF_HAVE_NCCL
#include <nccl.h>
#endif

namespace shoal::perf {

#ifdef SHOAL_PERF_HAVE_NCCL

namespace {
void nccl_failed(ncclResult_t status, const char* call, ncclComm_t comm) {
  std::string text = std::string(call) + " failed: " + ncclGetErrorString(status);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') text += std::string(" (") + last + ")";
  throw std::runtime_error(text);
}
}  // namespace

#define SHOAL_PERF_NCCL(call, comm)                                 \
  do {                                                              \
    ncclResult_t shoal_perf_nccl_ = (call);                         \
    if (shoal_perf_nccl_ != ncclSuccess) nccl_failed(shoal_perf_nccl_, #call, comm); \
  } while (0)

struct nccl_peer::impl {
  ncclComm_t comm = nullptr;
  int version = 0;
};

bool nccl_peer::compiled_in() { return true; }

std::unique_ptr<nccl_peer> nccl_peer::open(context& ctx) {
  auto state = std::make_unique<impl>();
  SHOAL_PERF_NCCL(ncclGetVersion(&state->version), nullptr);
  ncclUniqueId id{};
  if (ctx.pe == 0) SHOAL_PERF_NCCL(ncclGetUniqueId(&id), nullptr);
  ctx.world.bootstrap().broadcast(&id, sizeof id, 0);
  SHOAL_PERF_CUDA(cudaSetDevice(ctx.world.device()));
  SHOAL_PERF_NCCL(ncclCommInitRank(&state->comm, ctx.n_pes, id, ctx.pe), nullptr);
  return std::unique_ptr<nccl_peer>(new nccl_peer(std::move(state)));
}

nccl_peer::~nccl_peer() {
  if (impl_ && impl_->comm != nullptr) ncclCommDestroy(impl_->comm);  // cleanup: nothing to do about a failure
}

std::string nccl_peer::version() const {
  int v = impl_->version;  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

measurement nccl_peer::measure_send_recv(context& ctx, std::uint64_t bytes) {
  ctx.reserve(bytes);
  const std::uint64_t stride = context::slot_stride(bytes);
  const std::uint32_t n_slots = ctx.n_slots(bytes);
  const std::int64_t ops = ctx.ops_per_batch(bytes);
  ncclComm_t comm = impl_->comm;
  auto enqueue = [&](std::uint64_t slot) {
    if (ctx.pe > 1) return;
    SHOAL_PERF_NCCL(ncclGroupStart(), comm);
    if (ctx.pe == 0) SHOAL_PERF_NCCL(ncclSend(ctx.src() + slot * stride, bytes, ncclUint8, 1, comm, ctx.stream), comm);
    else SHOAL_PERF_NCCL(ncclRecv(ctx.dst() + slot * stride, bytes, ncclUint8, 0, comm, ctx.stream), comm);
    SHOAL_PERF_NCCL(ncclGroupEnd(), comm);
  };
  std::uint64_t next_slot = 0;
  std::vector<double> ms = time_batches(ctx, [&](int) {
    for (std::int64_t i = 0; i < ops; ++i) enqueue(next_slot++ % n_slots);
  });
  ms = ctx.max_over_pes(ms);
  std::vector<double> us;
  for (double v : ms) us.push_back(v * 1e3 / static_cast<double>(ops));
  measurement m;
  m.ops = ops;
  m.t = summarize(us);
  if (ctx.opt.check) {
    const transfer t{0, ctx.src(), 1, ctx.dst(), bytes};
    m.check = check_transfers(ctx, {&t, 1}, [&] {
      enqueue(0);
      ctx.sync_stream();
    });
  }
  return m;
}

bool nccl_peer::has(collective op) { return op != collective::barrier; }

measurement nccl_peer::measure_collective(context& ctx, collective op, std::uint64_t bytes) {
  if (!has(op)) throw std::invalid_argument("NCCL has no " + coll_name(op));
  if (op == collective::alltoall && bytes >= (std::uint64_t{1} << 20)) {
    // Known problem of this harness: NCCL's grouped send/recv alltoall of 1 MiB blocks and more never
    // completed under graph capture on 2 x H200 (NCCL 2.28.9), with or without the send to self.
    measurement skipped;
    skipped.note = "alltoall not measured from 1 MiB blocks (its graph-captured send/recv hung on 2 x H200)";
    return skipped;
  }
  const std::uint64_t buffer = coll_buffer_bytes(op, bytes, ctx.n_pes);
  ctx.reserve(buffer);
  const std::uint64_t stride = context::slot_stride(buffer);
  const std::uint32_t n_slots = ctx.n_slots(buffer);
  const std::int64_t ops = coll_ops(ctx, bytes);
  const std::size_t count = bytes / kCollElemBytes;
  ncclComm_t comm = impl_->comm;
  auto enqueue = [&](std::uint64_t slot) {
    const std::byte* src = ctx.src() + slot * stride;
    std::byte* dst = ctx.dst() + slot * stride;
    switch (op) {
      case collective::reduce:
        SHOAL_PERF_NCCL(ncclAllReduce(src, dst, count, ncclBfloat16, ncclSum, comm, ctx.stream), comm);
        break;
      case collective::reducescatter:
        SHOAL_PERF_NCCL(ncclReduceScatter(src, dst, count, ncclBfloat16, ncclSum, comm, ctx.stream), comm);
        break;
      case collective::fcollect:
        SHOAL_PERF_NCCL(ncclAllGather(src, dst, bytes, ncclUint8, comm, ctx.stream), comm);
        break;
      case collective::broadcast:
        SHOAL_PERF_NCCL(ncclBroadcast(src, dst, bytes, ncclUint8, kBroadcastRoot, comm, ctx.stream), comm);
        break;
      case collective::alltoall:
        // The own block is a local copy: NCCL's send/recv to self hung under graph capture from 1 MiB on
        // 2 x H200 (NCCL 2.28.9), and a copy is what the send to self amounts to.
        SHOAL_PERF_CUDA(cudaMemcpyAsync(dst + std::uint64_t(ctx.pe) * bytes, src + std::uint64_t(ctx.pe) * bytes,
                                        bytes, cudaMemcpyDeviceToDevice, ctx.stream));
        SHOAL_PERF_NCCL(ncclGroupStart(), comm);
        for (int p = 0; p < ctx.n_pes; ++p) {
          if (p == ctx.pe) continue;
          SHOAL_PERF_NCCL(ncclSend(src + std::uint64_t(p) * bytes, bytes, ncclUint8, p, comm, ctx.stream), comm);
          SHOAL_PERF_NCCL(ncclRecv(dst + std::uint64_t(p) * bytes, bytes, ncclUint8, p, comm, ctx.stream), comm);
        }
        SHOAL_PERF_NCCL(ncclGroupEnd(), comm);
        break;
      case collective::barrier:
        break;
    }
  };
  measurement m;
  m.ops = ops;
  enqueue(0);
  ctx.barrier();
  const coll_batch_graphs graphs(ctx, ops, n_slots, enqueue);
  if (!graphs.ok()) {
    m.check = check_result::failed;
    m.note = "graph capture failed: " + graphs.error();
    return m;
  }
  m.t = summarize(time_coll_batches(ctx, ops, [&](int batch) { graphs.launch(batch, ctx.stream); }));
  m.note = "graph replay, slowest PE";
  if (ctx.opt.check) {
    const coll_check_outcome o = check_coll(ctx, op, bytes, [&] {
      enqueue(0);
      ctx.sync_stream();
    });
    m.check = o.result;
    if (!o.note.empty()) m.note += "; " + o.note;
  }
  return m;
}

#else  // no NCCL in this build

struct nccl_peer::impl {};
bool nccl_peer::compiled_in() { return false; }
std::unique_ptr<nccl_peer> nccl_peer::open(context&) { return nullptr; }
nccl_peer::~nccl_peer() = default;
std::string nccl_peer::version() const { return ""; }
measurement nccl_peer::measure_send_recv(context&, std::uint64_t) { return {}; }
bool nccl_peer::has(collective) { return false; }
measurement nccl_peer::measure_collective(context&, collective, std::uint64_t) { return {}; }

#endif

nccl_peer::nccl_peer(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}

}  // namespace shoal::perf
