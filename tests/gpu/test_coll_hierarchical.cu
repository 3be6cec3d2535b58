// The hierarchical all-reduce (src/coll/hierarchical.hpp) against a host reference on random data, and the
// in-place fcollect it is built on. The hierarchical cases need the world across nodes with at least two
// PEs on each (for example 4 PEs on 2 GPUs with SHOAL_EMULATE_NODES=2); elsewhere they skip, saying so.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "coll/hierarchical.hpp"
#include "gpu_env.hpp"
#include "host/work_queues.hpp"
#include "host/world_impl.hpp"

namespace shoal::gpu_test {
namespace {

// Sets an environment variable for a scope, then puts back what was there.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Sets the chunk count that init read from SHOAL_HIERARCHICAL_CHUNKS for a scope (on every PE alike: the calls
// read it, not the environment), then puts back what was there.
class scoped_chunks {
 public:
  scoped_chunks(world& w, std::int64_t chunks) : cfg_(w.internals().cfg), old_(cfg_.hierarchical_chunks) {
    cfg_.hierarchical_chunks = chunks;
  }
  ~scoped_chunks() { cfg_.hierarchical_chunks = old_; }

 private:
  detail::config& cfg_;
  std::int64_t old_;
};

std::vector<std::int32_t> pe_values(int pe, std::size_t count, std::uint64_t salt) {
  const std::vector<std::uint8_t> bytes = random_bytes(salt * 1000 + std::uint64_t(pe), count * 4);
  std::vector<std::int32_t> v(count);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// Every member writes its block into its own slot of dst, then gathers in place; each slot must hold its
// member's block.
TEST(CollHierarchical, FcollectInPlace) {
  SHOAL_REQUIRE_WORLD(1);
  world& w = *the_world();
  const team& t = world_team(w);
  const int n = t.size(), me = t.my_index();
  for (const std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{1000}, std::size_t{100000}}) {
    SCOPED_TRACE("count " + std::to_string(count));
    auto* dst = static_cast<std::int32_t*>(w.malloc(count * n * sizeof(std::int32_t)));
    upload(dst + me * count, random_bytes(77 + me, count * 4));
    fcollect_on_stream(t, dst, dst + me * count, count, nullptr);
    CUDA_OK(cudaStreamSynchronize(nullptr));
    const std::vector<std::uint8_t> got = download(dst, count * n * 4);
    for (int i = 0; i < n; ++i) {
      const std::vector<std::uint8_t> want = random_bytes(77 + i, count * 4);
      ASSERT_EQ(0, std::memcmp(got.data() + i * count * 4, want.data(), want.size())) << "block of member " << i;
    }
    barrier_all_on_stream(w, nullptr);
    CUDA_OK(cudaStreamSynchronize(nullptr));
    w.free(dst);
  }
}

// Forced hierarchical (and checked that it does run so), int32 sum and max, counts that divide among the
// node's PEs and counts that leave a remainder (which goes flat), from one element per PE to 4 MiB; with
// the pipeline forced to 1, 3 (uneven chunks) and 16 chunks, and as planned.
TEST(CollHierarchical, AllReduceMatchesTheReference) {
  SHOAL_REQUIRE_WORLD(4);
  world& w = *the_world();
  const team& t = world_team(w);
  const int m = node_team(w).size(), nodes = same_local_rank_team(w).size(), n = t.size();
  if (m < 2 || nodes < 2 || m * nodes != n)
    GTEST_SKIP() << "needs the PEs across nodes with at least 2 on each; this job has " << nodes << " node(s) of " << m
                 << " PE(s) (try 4 PEs with SHOAL_EMULATE_NODES=2)";
  if (w.internals().fewest_work_queues < detail::kHierarchicalWorkQueues) {
    // Too few queues for its streams and the proxy's: the model must not pick it, and forcing it must say why
    // instead of hanging.
    auto* buf = static_cast<std::int32_t*>(w.malloc(2 * 4096 * sizeof(std::int32_t)));
    EXPECT_FALSE(detail::runs_hierarchically(t, t.device_handle(), buf, buf + 4096, 4096, 4));
    {
      const scoped_env force("SHOAL_ALGO_REDUCE", "hierarchical");
      EXPECT_THROW(detail::runs_hierarchically(t, t.device_handle(), buf, buf + 4096, 4096, 4), shoal::error);
    }
    w.free(buf);
    GTEST_SKIP() << "PE " << w.internals().fewest_work_queues_pe << " has " << w.internals().fewest_work_queues
                 << " hardware work queues; the hierarchical all-reduce "
                 << "needs " << detail::kHierarchicalWorkQueues << " (set CUDA_DEVICE_MAX_CONNECTIONS; under MPS "
                 << "the default is 2)";
  }
  const scoped_env force("SHOAL_ALGO_REDUCE", "hierarchical");
  std::uint64_t salt = 0;
  // Unpipelined, in 3 uneven chunks, in 16, and as the model plans it.
  for (const int chunks : {1, 3, 16, 0}) {
    const scoped_chunks pipeline(w, chunks);
    for (const std::size_t count : {std::size_t(m), std::size_t(m) * 1000 + 1,
                                    std::size_t(m) * 12288 + std::size_t(m) - 1, std::size_t{1} << 20}) {
      for (const reduce_op op : {reduce_op::sum, reduce_op::max}) {
        SCOPED_TRACE("count " + std::to_string(count) + (op == reduce_op::sum ? " sum" : " max") + ", chunks " +
                     std::to_string(chunks));
        ++salt;
        auto* src = static_cast<std::int32_t*>(w.malloc(count * sizeof(std::int32_t)));
        auto* dst = static_cast<std::int32_t*>(w.malloc(count * sizeof(std::int32_t)));
        ASSERT_TRUE(detail::runs_hierarchically(t, t.device_handle(), dst, src, count, sizeof(std::int32_t)));
        const std::vector<std::int32_t> mine = pe_values(w.pe(), count, salt);
        CUDA_OK(cudaMemcpy(src, mine.data(), count * 4, cudaMemcpyHostToDevice));
        reduce_on_stream(t, dst, src, count, op, nullptr);
        CUDA_OK(cudaStreamSynchronize(nullptr));
        std::vector<std::int32_t> want = pe_values(0, count, salt);
        for (int pe = 1; pe < n; ++pe) {
          const std::vector<std::int32_t> theirs = pe_values(pe, count, salt);
          for (std::size_t k = 0; k < count; ++k)
            want[k] = op == reduce_op::sum ? std::int32_t(std::uint32_t(want[k]) + std::uint32_t(theirs[k]))
                                           : std::max(want[k], theirs[k]);
        }
        std::vector<std::int32_t> got(count);
        CUDA_OK(cudaMemcpy(got.data(), dst, count * 4, cudaMemcpyDeviceToHost));
        std::size_t bad = 0;
        for (std::size_t k = 0; k < count; ++k) bad += got[k] != want[k];
        EXPECT_EQ(bad, 0u) << "elements wrong; first at " << [&] {
          for (std::size_t k = 0; k < count; ++k)
            if (got[k] != want[k]) return k;
          return count;
        }();
        barrier_all_on_stream(w, nullptr);
        CUDA_OK(cudaStreamSynchronize(nullptr));
        w.free(dst);
        w.free(src);
      }
    }
  }
  // In place it does not apply (the reduce-scatter would overwrite the source): that call runs flat.
  auto* buf = static_cast<std::int32_t*>(w.malloc(4096 * sizeof(std::int32_t)));
  EXPECT_FALSE(detail::runs_hierarchically(t, t.device_handle(), buf, buf, 4096, 4));
  // All channels named explicitly count as all of them; a part of them runs flat (its own channels only).
  const team_handle all = t.device_handle();
  EXPECT_TRUE(detail::runs_hierarchically(t, all.channels(0, all.channel_count), buf, buf + 2048, 2048, 4));
  if (all.channel_count > 1)
    EXPECT_FALSE(detail::runs_hierarchically(t, all.channels(1, all.channel_count - 1), buf, buf + 2048, 2048, 4));
  w.free(buf);
}

}  // namespace
}  // namespace shoal::gpu_test
