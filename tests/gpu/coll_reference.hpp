// Host side of the collective tests: random inputs every PE can recompute for every PE, the reference
// result of each collective, a symmetric "arena" whose every byte is known (so writes outside dst and
// changes to src are caught), and one driver that runs a collective on a team and checks it.
//
// A case: each PE fills src from random_values(seed, its world PE), every PE meets, the members run the
// collective, each member compares its dst with expected_dst() computed from all members' inputs and
// checks that no other byte of the arena changed, every PE meets again. Every PE of the world calls the
// drivers in the same order (non-members of a split team take part in the host barriers only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpu_env.hpp"
#include "shoal/coll_types.hpp"
#include "shoal/dev/scope.cuh"

namespace shoal::gpu_test {

// ---- what is being tested

enum class coll_kind { reduce, reducescatter, broadcast, fcollect, alltoall };

inline const char* to_string(coll_kind kind) {
  constexpr const char* kNames[] = {"reduce", "reducescatter", "broadcast", "fcollect", "alltoall"};
  return kNames[static_cast<int>(kind)];
}

inline constexpr collective collective_of(coll_kind kind) {
  constexpr collective kColl[] = {collective::reduce, collective::reducescatter, collective::broadcast,
                                  collective::fcollect, collective::alltoall};
  return kColl[static_cast<int>(kind)];
}

inline constexpr bool is_reduction(coll_kind kind) {
  return kind == coll_kind::reduce || kind == coll_kind::reducescatter;
}

// Elements of src and dst of one member, for `count` as the call takes it.
inline std::size_t src_elements(coll_kind kind, std::size_t count, int n) {
  return kind == coll_kind::reducescatter || kind == coll_kind::alltoall ? count * std::size_t(n) : count;
}
inline std::size_t dst_elements(coll_kind kind, std::size_t count, int n) {
  return kind == coll_kind::fcollect || kind == coll_kind::alltoall ? count * std::size_t(n) : count;
}

// The algorithms each collective implements, forced in turn; std::nullopt leaves the choice to the model.
inline std::vector<std::optional<algorithm>> algorithms_of(coll_kind kind) {
  const algorithm large = kind == coll_kind::reduce ? algorithm::two_shot : algorithm::direct;
  return {std::nullopt, algorithm::ll, algorithm::one_shot, large};
}

inline std::string to_string(std::optional<algorithm> algo) {
  return algo ? std::string(shoal::to_string(*algo)) : std::string("model");
}

enum class scope_kind { thread, warp, block, grid };

inline const char* to_string(scope_kind scope) {
  constexpr const char* kNames[] = {"thread", "warp", "block", "grid"};
  return kNames[static_cast<int>(scope)];
}

struct launch_shape {
  unsigned blocks, threads;
};

// Grid scope runs 4 CTAs, so the data splits into 4 parts on 4 channels.
inline launch_shape shape_of(scope_kind scope) {
  switch (scope) {
    case scope_kind::thread:
      return {1, 1};
    case scope_kind::warp:
      return {1, 32};
    case scope_kind::block:
      return {1, 256};
    case scope_kind::grid:
      return {4, 128};
  }
  return {1, 1};
}

// Turns a test's runtime choice of scope and algorithms into a kernel instantiation: calls
// launch.template operator()<Scope, kLLOnly>() with the scope type `scope` names.
template <typename Launch>
void with_scope(scope_kind scope, bool ll_only, Launch&& launch) {
  auto at = [&]<typename Scope>() {
    if (ll_only)
      launch.template operator()<Scope, true>();
    else
      launch.template operator()<Scope, false>();
  };
  switch (scope) {
    case scope_kind::thread:
      return at.template operator()<thread_scope>();
    case scope_kind::warp:
      return at.template operator()<warp_scope>();
    case scope_kind::block:
      return at.template operator()<block_scope>();
    case scope_kind::grid:
      return at.template operator()<grid_scope>();
  }
}

// In a test kernel: call() or, with kLLOnly, call(shoal::ll_only), the collective's trailing argument.
template <bool kLLOnly, typename Call>
__device__ void with_ll_only(Call call) {
  if constexpr (kLLOnly)
    call(ll_only);
  else
    call();
}

// Waits for the kernel just launched; throws (failing the test) when it could not run or faulted.
inline void wait_for_kernel(const char* what) {
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) status = cudaDeviceSynchronize();
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// ---- element types on the host

template <typename T>
inline constexpr bool is_low_precision_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// half and bfloat16 accumulate in float, as on the device.
template <typename T>
using host_acc_t = std::conditional_t<is_low_precision_v<T>, float, T>;

template <typename T>
host_acc_t<T> to_acc(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return v;
}

template <typename T>
T from_acc(host_acc_t<T> v) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else
    return v;
}

template <typename T>
double to_double(T v) {
  return static_cast<double>(to_acc(v));
}

template <typename T>
std::string show(T v) {
  std::ostringstream out;
  if constexpr (std::is_integral_v<T>) {
    out << +v;
  } else {
    out.precision(17);
    out << to_double(v);
  }
  return out.str();
}

// Unit roundoff of T: the relative error of one rounding.
template <typename T>
constexpr double unit_roundoff() {
  if constexpr (std::is_same_v<T, __half>) return 1.0 / 2048;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return 1.0 / 256;
  if constexpr (std::is_same_v<T, float>) return 1.0 / (1 << 24);
  if constexpr (std::is_same_v<T, double>) return 1.0 / 9007199254740992.0;
  return 0;
}

// Random inputs from random_bytes: integers take every bit pattern; floating values are never zero, with
// magnitudes in [1/8, 16) (products: [1/2, 2), so a product over many PEs stays finite in half).
template <typename T>
std::vector<T> random_values(std::uint64_t seed, std::size_t count, reduce_op op = reduce_op::sum) {
  constexpr std::size_t kBytes = std::is_integral_v<T> ? sizeof(T) : 4;
  const std::vector<std::uint8_t> bytes = random_bytes(seed, count * kBytes);
  std::vector<T> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    if constexpr (std::is_integral_v<T>) {
      std::memcpy(&out[i], bytes.data() + i * kBytes, sizeof(T));
    } else {
      std::uint32_t r;
      std::memcpy(&r, bytes.data() + i * kBytes, 4);
      const double fraction = double(r & 0xFFFFFFu) / double(1u << 24);
      const double sign = (r >> 31) != 0 ? -1.0 : 1.0;
      const double magnitude =
          op == reduce_op::prod ? 0.5 + 1.5 * fraction : std::ldexp(1.0 + fraction, int((r >> 24) & 0x7Fu) % 7 - 3);
      if constexpr (is_low_precision_v<T>)
        out[i] = from_acc<T>(static_cast<float>(sign * magnitude));
      else
        out[i] = static_cast<T>(sign * magnitude);
    }
  }
  return out;
}

// One step of a reduction on the host. Integer sum and prod wrap: computed unsigned, and in 64 bits so
// that 16-bit operands are not promoted to a signed int that overflows.
template <typename A>
A host_combine(reduce_op op, A a, A b) {
  if ((op == reduce_op::min || op == reduce_op::max) && std::is_floating_point_v<A>) {
    // IEEE 754-2019 minimum and maximum, as the library: a NaN wins, -0 < +0.
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<A>::quiet_NaN();
    const bool take_b = a == b ? std::signbit(a) == (op == reduce_op::max) : (a < b) == (op == reduce_op::max);
    return take_b ? b : a;
  }
  switch (op) {
    case reduce_op::min:
      return b < a ? b : a;
    case reduce_op::max:
      return a < b ? b : a;
    default:
      break;
  }
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    const std::uint64_t x = static_cast<U>(a), y = static_cast<U>(b);
    switch (op) {
      case reduce_op::sum:
        return static_cast<A>(static_cast<U>(x + y));
      case reduce_op::prod:
        return static_cast<A>(static_cast<U>(x * y));
      case reduce_op::bit_and:
        return static_cast<A>(x & y);
      case reduce_op::bit_or:
        return static_cast<A>(x | y);
      case reduce_op::bit_xor:
        return static_cast<A>(x ^ y);
      default:
        break;
    }
  } else {
    if (op == reduce_op::sum) return a + b;
    if (op == reduce_op::prod) return a * b;
  }
  throw std::logic_error("host_combine: operator not defined for the type");
}

// An expected element: the value, and how far a correct result may be from it (0: bit for bit).
template <typename T>
struct want {
  T value;
  double tolerance = 0;
};

// op over `values` (one per member, in team order). Exact for integers, min and max, and for sum and
// prod over at most two members (IEEE addition and multiplication commute, and half/bfloat16 round once
// from float as the device does). Over more members the device's order differs from this one, so sum
// and prod get a tolerance of a few roundings of the magnitudes involved.
template <typename T>
want<T> reduce_values(reduce_op op, const std::vector<T>& values) {
  host_acc_t<T> acc = to_acc(values[0]);
  double magnitude = std::fabs(to_double(values[0]));
  for (std::size_t i = 1; i < values.size(); ++i) {
    acc = host_combine(op, acc, to_acc(values[i]));
    const double x = std::fabs(to_double(values[i]));
    magnitude = op == reduce_op::prod ? magnitude * x : magnitude + x;
  }
  double tolerance = 0;
  if (!std::is_integral_v<T> && values.size() > 2 && (op == reduce_op::sum || op == reduce_op::prod))
    tolerance = 2.0 * double(values.size()) * unit_roundoff<T>() * magnitude;
  return {from_acc<T>(acc), tolerance};
}

// What member `me` holds in dst after `kind`, where inputs[i] is member i's src.
template <typename T>
std::vector<want<T>> expected_dst(coll_kind kind, reduce_op op, int me, const std::vector<std::vector<T>>& inputs,
                                  std::size_t count, int root) {
  const int n = int(inputs.size());
  std::vector<want<T>> out;
  out.reserve(dst_elements(kind, count, n));
  std::vector<T> column(n);
  auto reduce_at = [&](std::size_t offset) {
    for (int i = 0; i < n; ++i) column[i] = inputs[i][offset];
    return reduce_values(op, column);
  };
  switch (kind) {
    case coll_kind::reduce:
      for (std::size_t k = 0; k < count; ++k) out.push_back(reduce_at(k));
      break;
    case coll_kind::reducescatter:
      for (std::size_t k = 0; k < count; ++k) out.push_back(reduce_at(std::size_t(me) * count + k));
      break;
    case coll_kind::broadcast:
      for (std::size_t k = 0; k < count; ++k) out.push_back({inputs[root][k]});
      break;
    case coll_kind::fcollect:
      for (int i = 0; i < n; ++i)
        for (std::size_t k = 0; k < count; ++k) out.push_back({inputs[i][k]});
      break;
    case coll_kind::alltoall:
      for (int i = 0; i < n; ++i)
        for (std::size_t k = 0; k < count; ++k) out.push_back({inputs[i][std::size_t(me) * count + k]});
      break;
  }
  return out;
}

template <typename T>
bool element_ok(T got, const want<T>& w) {
  if (w.tolerance == 0) return std::memcmp(&got, &w.value, sizeof(T)) == 0;
  return std::fabs(to_double(got) - to_double(w.value)) <= w.tolerance;
}

template <typename T>
::testing::AssertionResult matches(const std::vector<T>& got, const std::vector<want<T>>& expected) {
  if (got.size() != expected.size())
    return ::testing::AssertionFailure() << "got " << got.size() << " elements, want " << expected.size();
  std::size_t bad = 0, first = 0;
  for (std::size_t k = 0; k < got.size(); ++k)
    if (!element_ok(got[k], expected[k]) && bad++ == 0) first = k;
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements wrong; first at [" << first
                                       << "]: got " << show(got[first]) << ", want " << show(expected[first].value)
                                       << " (tolerance " << expected[first].tolerance << ")";
}

// ---- the arena

// A symmetric buffer carved into regions for one case at a time. reset() gives every byte a random
// filler (different on every PE); fill() puts a member's src values into the image; upload() writes the
// image to the GPU. After the collective, every byte outside the regions marked with will_write() must
// still equal the image: src unchanged, nothing written past dst. Regions start `misalign` elements past
// a 256-byte boundary, after a gap of at least kGuard filler bytes. Construction and destruction are
// collective (w.malloc / w.free).
class sym_arena {
 public:
  static constexpr std::size_t kGuard = 64;

  sym_arena(world& w, std::size_t bytes) : w_(&w), bytes_(bytes), base_(static_cast<std::byte*>(w.malloc(bytes))) {}
  ~sym_arena() { w_->free(base_); }
  sym_arena(const sym_arena&) = delete;
  sym_arena& operator=(const sym_arena&) = delete;

  world& owner() const { return *w_; }

  void reset(std::uint64_t seed) {
    rng_.seed(seed * 0x2545F4914F6CDD1Dull + std::uint64_t(w_->pe()) * 0x9E3779B97F4A7C15ull + 1);
    image_.clear();
    outputs_.clear();
  }

  template <typename T>
  T* carve(std::size_t count, std::size_t misalign = 0) {
    const std::size_t begin = (image_.size() + kGuard + 255) / 256 * 256 + misalign * sizeof(T);
    const std::size_t end = begin + count * sizeof(T);
    if (end + kGuard > bytes_) throw std::length_error("sym_arena: the case does not fit");
    grow_to(end + kGuard);
    return reinterpret_cast<T*>(base_ + begin);
  }

  template <typename T>
  void fill(T* p, const std::vector<T>& values) {
    if (!values.empty()) std::memcpy(image_.data() + offset(p), values.data(), values.size() * sizeof(T));
  }

  void will_write(const void* p, std::size_t bytes) { outputs_.push_back({offset(p), bytes}); }

  void upload() const { gpu_test::upload(base_, image_); }
  std::vector<std::uint8_t> download() const { return gpu_test::download(base_, image_.size()); }

  template <typename T>
  std::vector<T> view(const std::vector<std::uint8_t>& bytes, const T* p, std::size_t count) const {
    std::vector<T> out(count);
    if (count != 0) std::memcpy(out.data(), bytes.data() + offset(p), count * sizeof(T));
    return out;
  }

  // The first byte outside the written regions that differs from the image, or -1.
  long long first_stray(const std::vector<std::uint8_t>& bytes) const {
    for (std::size_t i = 0; i < image_.size(); ++i) {
      if (bytes[i] == image_[i]) continue;
      bool written = false;
      for (auto [begin, size] : outputs_) written |= i >= begin && i < begin + size;
      if (!written) return static_cast<long long>(i);
    }
    return -1;
  }

 private:
  std::size_t offset(const void* p) const { return std::size_t(static_cast<const std::byte*>(p) - base_); }

  void grow_to(std::size_t size) {
    while (image_.size() < size) {
      const std::uint64_t r = rng_();
      for (int b = 0; b < 8 && image_.size() < size; ++b) image_.push_back(std::uint8_t(r >> (8 * b)));
    }
  }

  world* w_;
  std::size_t bytes_;
  std::byte* base_;
  std::mt19937_64 rng_;
  std::vector<std::uint8_t> image_;
  std::vector<std::pair<std::size_t, std::size_t>> outputs_;
};

// ---- the driver

struct coll_case {
  coll_kind kind = coll_kind::reduce;
  reduce_op op = reduce_op::sum;
  std::size_t count = 0;
  std::size_t src_misalign = 0;  // elements past a 256-byte boundary
  std::size_t dst_misalign = 0;  // (in place: src's)
  bool in_place = false;     // dst == src (reduce and broadcast)
  int root = 0;

  std::string describe() const {
    std::ostringstream out;
    out << to_string(kind) << " op=" << shoal::to_string(op) << " count=" << count << " misalign=" << src_misalign
        << "/" << dst_misalign << (in_place ? " in_place" : "") << " root=" << root;
    return out.str();
  }
};

// Runs case `c` on team `t` and checks it (see the top of this file). `launch(dst, src)` runs the
// collective on this member and returns when it is complete here. Every PE of the world calls.
template <typename T, typename Launch>
void check_case(sym_arena& arena, const team& t, const coll_case& c, std::uint64_t seed, Launch&& launch) {
  world& w = arena.owner();
  const int n = std::max(t.size(), 1);
  const std::size_t src_len = src_elements(c.kind, c.count, n), dst_len = dst_elements(c.kind, c.count, n);
  arena.reset(seed);
  T* src = arena.carve<T>(src_len, c.src_misalign);
  T* dst = c.in_place ? src : arena.carve<T>(dst_len, c.dst_misalign);
  auto input_of = [&](int pe) { return random_values<T>(seed * 1024 + std::uint64_t(pe), src_len, c.op); };
  if (t.member()) {
    arena.fill(src, input_of(w.pe()));
    arena.will_write(dst, dst_len * sizeof(T));
  }
  arena.upload();
  barrier_all(w);  // every member's src and filler are in place before any member's collective starts
  if (t.member()) {
    SCOPED_TRACE(c.describe());
    launch(dst, src);
    const std::vector<std::uint8_t> got = arena.download();
    std::vector<std::vector<T>> inputs(n);
    for (int i = 0; i < n; ++i) inputs[i] = input_of(t.pe_of(i));
    EXPECT_TRUE(
        matches(arena.view(got, dst, dst_len), expected_dst(c.kind, c.op, t.my_index(), inputs, c.count, c.root)));
    EXPECT_EQ(arena.first_stray(got), -1) << "a byte outside dst changed (src overwritten, or a write out of bounds)";
  }
  barrier_all(w);  // nobody refills before every member has checked
}

// The device-API launchers shared by the test files: each runs one collective on this member with
// shape_of(scope) and waits for it; with `ll_only` every call passes shoal::ll_only. Reductions use int32_t
// and sum (test_coll_reduce.cu); the data-moving collectives are defined for int32_t and uint8_t
// (test_coll_exchange.cu).
void device_reduce_i32(scope_kind scope, const team_handle& t, coll_kind kind, std::int32_t* dst,
                       const std::int32_t* src, std::size_t count, bool ll_only);
template <typename T>
void device_exchange(scope_kind scope, const team_handle& t, coll_kind kind, T* dst, const T* src, std::size_t count,
                     int root, bool ll_only);

// A launcher for run_matrix: (handle with the algorithm applied, kind, dst, src, count, root).
template <typename T>
using device_launcher = std::function<void(const team_handle&, coll_kind, T*, const T*, std::size_t, int)>;

template <typename T>
device_launcher<T> device_api_at(scope_kind scope, bool ll_only = false) {
  return [scope, ll_only](const team_handle& h, coll_kind kind, T* dst, const T* src, std::size_t count, int root) {
    if (is_reduction(kind)) {
      if constexpr (std::is_same_v<T, std::int32_t>)
        device_reduce_i32(scope, h, kind, dst, src, count, ll_only);
      else
        throw std::logic_error("device_api_at: reductions are launched on int32_t only");
    } else {
      device_exchange(scope, h, kind, dst, src, count, root, ll_only);
    }
  };
}

struct matrix_options {
  std::vector<coll_kind> kinds;
  std::vector<std::size_t> counts;
  reduce_op op = reduce_op::sum;
  bool misaligned = true;  // also run each count with src 1 and dst 2 elements past an aligned address
  bool in_place = true;    // also run reduce and broadcast with dst == src
  std::vector<std::optional<algorithm>> algorithms;  // empty: algorithms_of(kind)
};

namespace detail_matrix {
// An arena for every case of `m`. Sized for the world, not the team: heap calls take the same size on every
// PE, and PEs in different teams of one split (rows of split_2d) may be in teams of different sizes.
template <typename T>
std::size_t arena_bytes(const world& w, const matrix_options& m) {
  std::size_t largest = 0;
  for (std::size_t count : m.counts) largest = std::max(largest, count);
  return 2 * (largest * std::size_t(w.n_pes()) + 2) * sizeof(T) + 4096;
}

// Calls f(c, case_id) for each count x layout (aligned; misaligned when m.misaligned; in place for reduce and
// broadcast when m.in_place) of `kind` on a team of n members. case_id counts up across calls, so that every
// case gets its own random data and root.
template <typename F>
void for_each_case(const matrix_options& m, coll_kind kind, int n, std::uint64_t& case_id, F&& f) {
  for (std::size_t count : m.counts) {
    for (int layout = 0; layout < 3; ++layout) {
      const bool in_place = layout == 2;
      if (layout == 1 && !m.misaligned) continue;
      if (in_place && !(m.in_place && (kind == coll_kind::reduce || kind == coll_kind::broadcast))) continue;
      ++case_id;
      const coll_case c{.kind = kind,
                        .op = m.op,
                        .count = count,
                        .src_misalign = layout == 1 ? 1u : 0u,
                        .dst_misalign = layout == 1 ? 2u : 0u,
                        .in_place = in_place,
                        .root = int(case_id % std::uint64_t(n))};
      f(c, case_id);
    }
  }
}
}  // namespace detail_matrix

// Every kind x algorithm (model's choice, then each forced with with_algorithm; or m.algorithms) x count x
// layout on team `t`, checked against the reference. Every PE of the world calls.
template <typename T>
void run_matrix(const team& t, const matrix_options& m, std::uint64_t seed, const device_launcher<T>& launch) {
  const int n = std::max(t.size(), 1);
  sym_arena arena(t.owner(), detail_matrix::arena_bytes<T>(t.owner(), m));
  std::uint64_t case_id = seed * 100000;
  for (coll_kind kind : m.kinds) {
    for (std::optional<algorithm> algo : m.algorithms.empty() ? algorithms_of(kind) : m.algorithms) {
      SCOPED_TRACE("algorithm " + to_string(algo) + " on a team of " + std::to_string(n));
      detail_matrix::for_each_case(m, kind, n, case_id, [&](const coll_case& c, std::uint64_t id) {
        check_case<T>(arena, t, c, id, [&](T* dst, const T* src) {
          team_handle h = t.device_handle();
          if (algo) h = h.with_algorithm(collective_of(kind), *algo);
          launch(h, kind, dst, src, c.count, c.root);
        });
      });
    }
  }
}

// ---- on-stream helpers

// Sets environment variables for its lifetime and restores the old values after (every PE does the same).
class scoped_env {
 public:
  scoped_env(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
      setenv(name, value, 1);
    }
  }
  ~scoped_env() {
    for (auto& [name, old] : saved_) {
      if (old)
        setenv(name.c_str(), old->c_str(), 1);
      else
        unsetenv(name.c_str());
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// The on-stream algorithm sets a test forces, one team each: SHOAL_ALGO_<COLLECTIVE> is read when a team
// is created, so each set gets its own copy of the world team. "auto" is the model's choice.
struct stream_algorithms {
  const char* reduce;
  const char* reducescatter;
  const char* exchange;  // broadcast, fcollect and alltoall
};
inline constexpr stream_algorithms kStreamAlgorithms[] = {{"auto", "auto", "auto"},
                                                          {"ll", "ll", "ll"},
                                                          {"one_shot", "one_shot", "one_shot"},
                                                          {"two_shot", "direct", "direct"}};

inline std::string describe(const stream_algorithms& a) {
  return std::string("SHOAL_ALGO_REDUCE=") + a.reduce + " SHOAL_ALGO_REDUCESCATTER=" + a.reducescatter +
         " SHOAL_ALGO_{BROADCAST,FCOLLECT,ALLTOALL}=" + a.exchange;
}

// A team of every PE (collective over the world) whose on-stream calls run the algorithms of `a`.
inline team world_copy_with(world& w, const stream_algorithms& a) {
  scoped_env env({{"SHOAL_ALGO_REDUCE", a.reduce},
                  {"SHOAL_ALGO_REDUCESCATTER", a.reducescatter},
                  {"SHOAL_ALGO_BROADCAST", a.exchange},
                  {"SHOAL_ALGO_FCOLLECT", a.exchange},
                  {"SHOAL_ALGO_ALLTOALL", a.exchange}});
  return split_strided(w, world_team(w), 0, 1, w.n_pes());
}

// Enqueues the on-stream form of `kind` (reductions with `op`).
template <typename T>
void enqueue_on_stream(const team& t, coll_kind kind, reduce_op op, T* dst, const T* src, std::size_t count, int root,
                       cudaStream_t stream, channel_range channels = {}) {
  switch (kind) {
    case coll_kind::reduce:
      reduce_on_stream(t, dst, src, count, op, stream, channels);
      break;
    case coll_kind::reducescatter:
      reducescatter_on_stream(t, dst, src, count, op, stream, channels);
      break;
    case coll_kind::broadcast:
      broadcast_on_stream(t, dst, src, count, root, stream, channels);
      break;
    case coll_kind::fcollect:
      fcollect_on_stream(t, dst, src, count, stream, channels);
      break;
    case coll_kind::alltoall:
      alltoall_on_stream(t, dst, src, count, stream, channels);
      break;
  }
}

// A stream for one test, destroyed with it.
class test_stream {
 public:
  test_stream() {
    if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess)
      throw std::runtime_error("cudaStreamCreate failed");
  }
  ~test_stream() { cudaStreamDestroy(stream_); }
  test_stream(const test_stream&) = delete;
  test_stream& operator=(const test_stream&) = delete;
  operator cudaStream_t() const { return stream_; }
  void wait(const char* what) const {
    const cudaError_t status = cudaStreamSynchronize(stream_);
    if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }

 private:
  cudaStream_t stream_ = nullptr;
};

// run_matrix for the on-stream forms: every kind x count x layout, with the algorithms team `t` was
// created with (see world_copy_with). Every PE of the world calls.
template <typename T>
void run_stream_matrix(const team& t, const matrix_options& m, std::uint64_t seed) {
  const int n = std::max(t.size(), 1);
  sym_arena arena(t.owner(), detail_matrix::arena_bytes<T>(t.owner(), m));
  test_stream stream;
  std::uint64_t case_id = seed * 100000;
  for (coll_kind kind : m.kinds) {
    detail_matrix::for_each_case(m, kind, n, case_id, [&](const coll_case& c, std::uint64_t id) {
      check_case<T>(arena, t, c, id, [&](T* dst, const T* src) {
        enqueue_on_stream(t, kind, c.op, dst, src, c.count, c.root, stream);
        stream.wait(to_string(kind));
      });
    });
  }
}

inline const std::vector<coll_kind> kAllKinds = {coll_kind::reduce, coll_kind::reducescatter, coll_kind::broadcast,
                                                 coll_kind::fcollect, coll_kind::alltoall};

}  // namespace shoal::gpu_test
