// The proxy descriptor: one fixed-size, 64-byte record per operation that a device call hands to its PE's
// proxy thread because the target PE is not load/store reachable. proxy_request is the unpacked form the
// device layer fills and the proxy reads; encode/decode convert with full validation, so a corrupt or
// foreign descriptor is an error value, never undefined behaviour. No CUDA dependency beyond SHOAL_HD;
// docs/proxy-design.md has the layout and the reasons for it.
#pragma once

#include <cstdint>
#include <type_traits>

#include "shoal/detail/host_device.hpp"

namespace shoal::detail {

enum class proxy_op : std::uint8_t {
  put,         // local [local, +size) -> remote [remote_offset, +size) on pe
  get,         // remote [remote_offset, +size) on pe -> local [local, +size)
  put_signal,  // put, then signal_op on the 64-bit word at signal_offset, ordered after the data
  signal,      // signal_op (set or add `value`) on the 64-bit word at signal_offset
  atomic,      // atomic_op of atomic_type on remote_offset; fetching ops return the old value in a result slot
  fence,       // order this PE's earlier puts/atomics/signals to pe (or to all) before later ones
  quiet,       // complete this PE's earlier operations to pe (or to all), remote writes visible
};
inline constexpr unsigned kProxyOpCount = 7;

enum class proxy_atomic_op : std::uint8_t {
  fetch,
  set,
  swap,
  compare_swap,
  fetch_add,
  add,
  fetch_and,
  bit_and,
  fetch_or,
  bit_or,
  fetch_xor,
  bit_xor,
};
inline constexpr unsigned kProxyAtomicOpCount = 12;

// Signedness changes none of the operations above (two's complement add and bitwise ops are the same
// bits), so an atomic is described by its width and whether it is floating point.
enum class proxy_atomic_type : std::uint8_t { int32, int64, float32, float64 };
inline constexpr unsigned kProxyAtomicTypeCount = 4;

enum class proxy_signal_op : std::uint8_t { set, add };
inline constexpr unsigned kProxySignalOpCount = 2;

// One error vocabulary for the codec and the ring (proxy_ring.hpp), so a device-side failure is one value.
enum class proxy_status : std::uint8_t {
  ok,
  bad_op,
  bad_atomic_op,
  bad_atomic_type,
  bad_signal_op,
  bad_type_for_op,     // a float atomic other than fetch/set/swap/fetch_add/add
  bad_pe,              // beyond the PE budget or the limits' n_pes; kProxyAllPes where only fences accept it
  bad_offset,          // beyond kProxyOffsetBits or the heap; or a range that runs off the heap
  bad_size,            // beyond kProxySizeBits
  bad_completion,      // beyond kProxyCompletionBits or the limits' result slots
  misaligned,          // an atomic or signal word not aligned to its width
  reserved_bits_set,   // a descriptor bit that no field owns is not zero
  unused_field_set,    // a field the op does not use is not zero (requests and descriptors are canonical)
  aborted,             // ring: the caller's abort callback gave up
  consumer_stopped,    // ring: the proxy thread stopped or failed
  completion_invalid,  // ring: complete() of a request not consumed, or completed twice
};

SHOAL_HD constexpr const char* to_string(proxy_status s) {
  switch (s) {
    case proxy_status::ok:
      return "ok";
    case proxy_status::bad_op:
      return "unknown proxy op";
    case proxy_status::bad_atomic_op:
      return "unknown atomic op";
    case proxy_status::bad_atomic_type:
      return "unknown atomic type";
    case proxy_status::bad_signal_op:
      return "unknown signal op";
    case proxy_status::bad_type_for_op:
      return "floating-point atomic other than fetch/set/swap/add";
    case proxy_status::bad_pe:
      return "PE out of range";
    case proxy_status::bad_offset:
      return "heap offset out of range";
    case proxy_status::bad_size:
      return "size out of range";
    case proxy_status::bad_completion:
      return "result slot out of range";
    case proxy_status::misaligned:
      return "atomic or signal word misaligned";
    case proxy_status::reserved_bits_set:
      return "reserved descriptor bits set";
    case proxy_status::unused_field_set:
      return "field set that the op does not use";
    case proxy_status::aborted:
      return "wait aborted";
    case proxy_status::consumer_stopped:
      return "proxy thread stopped";
    case proxy_status::completion_invalid:
      return "completion of a request not outstanding";
  }
  return "unknown proxy status";
}

// Bit budgets of the packed fields. Word 1 of a descriptor is the header; the others hold one field each,
// checked against these budgets so the header can later absorb a field without changing its meaning.
inline constexpr unsigned kProxyOpBits = 5;
inline constexpr unsigned kProxyAtomicOpBits = 4;
inline constexpr unsigned kProxyAtomicTypeBits = 3;
inline constexpr unsigned kProxySignalOpBits = 2;
inline constexpr unsigned kProxyFlagBits = 3;
inline constexpr unsigned kProxyPeBits = 24;          // 16M PEs
inline constexpr unsigned kProxyCompletionBits = 20;  // 1M result slots per PE
inline constexpr unsigned kProxyOffsetBits = 48;      // 256 TiB of symmetric heap per PE
inline constexpr unsigned kProxySizeBits = 48;

inline constexpr unsigned kProxyOpShift = 0;
inline constexpr unsigned kProxyAtomicOpShift = kProxyOpShift + kProxyOpBits;
inline constexpr unsigned kProxyAtomicTypeShift = kProxyAtomicOpShift + kProxyAtomicOpBits;
inline constexpr unsigned kProxySignalOpShift = kProxyAtomicTypeShift + kProxyAtomicTypeBits;
inline constexpr unsigned kProxyFlagShift = kProxySignalOpShift + kProxySignalOpBits;
inline constexpr unsigned kProxyPeShift = kProxyFlagShift + kProxyFlagBits;
inline constexpr unsigned kProxyCompletionShift = kProxyPeShift + kProxyPeBits;
inline constexpr unsigned kProxyHeaderBits = kProxyCompletionShift + kProxyCompletionBits;

static_assert(kProxyHeaderBits <= 64, "the header fields must fit in one 64-bit word");
static_assert(kProxyOpCount <= (1u << kProxyOpBits), "op budget");
static_assert(kProxyAtomicOpCount <= (1u << kProxyAtomicOpBits), "atomic op budget");
static_assert(kProxyAtomicTypeCount <= (1u << kProxyAtomicTypeBits), "atomic type budget");
static_assert(kProxySignalOpCount <= (1u << kProxySignalOpBits), "signal op budget");
static_assert(kProxyOffsetBits < 64 && kProxySizeBits < 64, "offset + size must not overflow 64 bits");

SHOAL_HD constexpr std::uint64_t proxy_field_mask(unsigned bits) {
  return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

// The PE value of a fence or quiet that applies to every peer (the largest the budget holds).
inline constexpr std::int32_t kProxyAllPes = static_cast<std::int32_t>(proxy_field_mask(kProxyPeBits));
inline constexpr std::int32_t kProxyMaxPes = kProxyAllPes;  // PEs 0 .. kProxyAllPes - 1
inline constexpr std::uint64_t kProxyMaxOffset = proxy_field_mask(kProxyOffsetBits);
inline constexpr std::uint64_t kProxyMaxSize = proxy_field_mask(kProxySizeBits);
inline constexpr std::uint32_t kProxyMaxCompletionSlots = static_cast<std::uint32_t>(1) << kProxyCompletionBits;

// Flag bit 0: `local` is a virtual address of the PE's own process (a registered buffer or a staging
// buffer) rather than an offset in its heap.
inline constexpr std::uint64_t kProxyFlagLocalIsAddress = 1;
// Flag bit 1, only with bit 0: that address is host memory, which the proxy copies with the CPU (a GPU
// heap's proxy copies device memory with the GPU's copy engines, which cannot wait on host buffers).
inline constexpr std::uint64_t kProxyFlagLocalIsHost = 2;
// Flag bit 2, only for put and put_signal of at most kProxyMaxInlineBytes and alone: `local` holds the
// data itself (byte i in bits 8i .. 8i + 7, the bits past `size` bytes zero). The kernel read the source
// when it posted, so the proxy sends without first copying it out of the GPU.
inline constexpr std::uint64_t kProxyFlagLocalIsInline = 4;
inline constexpr std::uint64_t kProxyMaxInlineBytes = 8;
inline constexpr std::uint64_t kProxyFlagsKnown =
    kProxyFlagLocalIsAddress | kProxyFlagLocalIsHost | kProxyFlagLocalIsInline;

// The unpacked form. Fields an op does not use must be zero (value-initialize with {}), so every request
// has exactly one descriptor and decode(encode(r)) == r.
struct proxy_request {
  proxy_op op = proxy_op::put;
  proxy_atomic_op atomic_op = proxy_atomic_op::fetch;        // op == atomic
  proxy_atomic_type atomic_type = proxy_atomic_type::int32;  // op == atomic
  proxy_signal_op signal_op = proxy_signal_op::set;          // op == put_signal or signal
  bool local_is_address = false;                             // put, get, put_signal
  bool local_is_host = false;                                // with local_is_address: host memory
  bool local_is_inline = false;                              // put, put_signal: `local` is the data
  std::int32_t pe = 0;                                       // target; kProxyAllPes for fence/quiet to all
  std::uint32_t completion = 0;     // fetching atomics: index of the result slot the old value goes to
  std::uint64_t sequence = 0;       // the request's ticket in its ring; the ring sets it
  std::uint64_t remote_offset = 0;  // put/get/put_signal data, atomic target: offset in pe's heap
  std::uint64_t local = 0;          // put/put_signal source, get destination: heap offset, address or data
  std::uint64_t size = 0;           // put/get/put_signal bytes
  std::uint64_t value = 0;          // atomic operand (bit pattern; 32-bit types in the low half), signal value
  std::uint64_t compare = 0;        // compare_swap: the expected old value
  std::uint64_t signal_offset = 0;  // put_signal, signal: offset of the 64-bit signal word in pe's heap

  friend bool operator==(const proxy_request&, const proxy_request&) = default;
};

// Word 0 is the sequence: the ring publishes a slot by storing it last (release), so it is the one word
// a consumer polls. Words 2..7 hold one field each; bits beyond a field's budget must be zero.
struct alignas(64) proxy_descriptor {
  static constexpr unsigned kWords = 8;
  static constexpr unsigned kSequenceWord = 0;
  static constexpr unsigned kHeaderWord = 1;
  static constexpr unsigned kRemoteOffsetWord = 2;
  static constexpr unsigned kLocalWord = 3;
  static constexpr unsigned kSizeWord = 4;
  static constexpr unsigned kValueWord = 5;
  static constexpr unsigned kCompareWord = 6;
  static constexpr unsigned kSignalOffsetWord = 7;
  std::uint64_t words[kWords];
};
static_assert(sizeof(proxy_descriptor) == 64, "one descriptor per 64-byte line: one PCIe write, no false sharing");
static_assert(std::is_trivially_copyable_v<proxy_descriptor>, "descriptors are copied as raw words");
static_assert(std::is_trivially_copyable_v<proxy_request>, "requests travel by value to the device");

// What the decoder checks beyond the bit budgets: the real PE count, heap size and result slots.
struct proxy_limits {
  std::int32_t n_pes = kProxyMaxPes;
  std::uint64_t heap_bytes = kProxyMaxOffset + 1;
  std::uint32_t completion_slots = kProxyMaxCompletionSlots;
};

struct proxy_encoded {
  proxy_descriptor descriptor{};
  proxy_status status = proxy_status::ok;
};
struct proxy_decoded {
  proxy_request request{};
  proxy_status status = proxy_status::ok;
};

SHOAL_HD constexpr bool proxy_atomic_fetches(proxy_atomic_op op) {
  return op != proxy_atomic_op::set && op != proxy_atomic_op::add && op != proxy_atomic_op::bit_and &&
         op != proxy_atomic_op::bit_or && op != proxy_atomic_op::bit_xor;
}
SHOAL_HD constexpr bool proxy_atomic_has_operand(proxy_atomic_op op) { return op != proxy_atomic_op::fetch; }
SHOAL_HD constexpr unsigned proxy_atomic_width(proxy_atomic_type t) {
  return t == proxy_atomic_type::int32 || t == proxy_atomic_type::float32 ? 4 : 8;
}
SHOAL_HD constexpr bool proxy_atomic_is_float(proxy_atomic_type t) {
  return t == proxy_atomic_type::float32 || t == proxy_atomic_type::float64;
}

namespace proxy_codec {

SHOAL_HD constexpr bool uses_data(proxy_op op) {
  return op == proxy_op::put || op == proxy_op::get || op == proxy_op::put_signal;
}
SHOAL_HD constexpr bool uses_signal(proxy_op op) { return op == proxy_op::put_signal || op == proxy_op::signal; }

// A range [offset, offset + bytes) inside a heap of heap_bytes; offsets and sizes are budget-checked
// first, so the sum cannot overflow.
SHOAL_HD constexpr bool in_heap(std::uint64_t offset, std::uint64_t bytes, std::uint64_t heap_bytes) {
  return offset <= kProxyMaxOffset && offset <= heap_bytes && bytes <= heap_bytes - offset;
}

}  // namespace proxy_codec

// Checks a request against the budgets and `limits`; encode and decode both run it.
SHOAL_HD constexpr proxy_status validate(const proxy_request& r, const proxy_limits& limits = {}) {
  using namespace proxy_codec;
  if (static_cast<unsigned>(r.op) >= kProxyOpCount) return proxy_status::bad_op;
  const bool data = uses_data(r.op);
  const bool signal = uses_signal(r.op);
  const bool atomic = r.op == proxy_op::atomic;
  const bool ordering = r.op == proxy_op::fence || r.op == proxy_op::quiet;

  // PE: every op names one; fence and quiet may name all.
  const bool all_pes = ordering && r.pe == kProxyAllPes;
  if (!all_pes && (r.pe < 0 || r.pe >= kProxyMaxPes || r.pe >= limits.n_pes)) return proxy_status::bad_pe;

  // Fields that belong to other ops must be zero.
  if (!atomic &&
      (r.atomic_op != proxy_atomic_op{} || r.atomic_type != proxy_atomic_type{} || r.completion != 0 || r.compare != 0))
    return proxy_status::unused_field_set;
  if (!signal && (r.signal_op != proxy_signal_op{} || r.signal_offset != 0)) return proxy_status::unused_field_set;
  if (!data && (r.local_is_address || r.local != 0 || r.size != 0)) return proxy_status::unused_field_set;
  if (r.local_is_host && !r.local_is_address) return proxy_status::unused_field_set;
  if (r.local_is_inline) {
    if (r.op != proxy_op::put && r.op != proxy_op::put_signal) return proxy_status::unused_field_set;
    if (r.local_is_address) return proxy_status::unused_field_set;
    if (r.size > kProxyMaxInlineBytes) return proxy_status::bad_size;
    if (r.size < 8 && (r.local >> (8 * r.size)) != 0) return proxy_status::unused_field_set;
  }
  if (!data && !atomic && r.remote_offset != 0) return proxy_status::unused_field_set;
  if (!signal && !atomic && r.value != 0) return proxy_status::unused_field_set;

  if (data) {
    if (r.size > kProxyMaxSize) return proxy_status::bad_size;
    if (!in_heap(r.remote_offset, r.size, limits.heap_bytes)) return proxy_status::bad_offset;
    if (!r.local_is_address && !r.local_is_inline && !in_heap(r.local, r.size, limits.heap_bytes))
      return proxy_status::bad_offset;
  }
  if (signal) {
    if (static_cast<unsigned>(r.signal_op) >= kProxySignalOpCount) return proxy_status::bad_signal_op;
    if (!in_heap(r.signal_offset, 8, limits.heap_bytes)) return proxy_status::bad_offset;
    if (r.signal_offset % 8 != 0) return proxy_status::misaligned;
  }
  if (atomic) {
    if (static_cast<unsigned>(r.atomic_op) >= kProxyAtomicOpCount) return proxy_status::bad_atomic_op;
    if (static_cast<unsigned>(r.atomic_type) >= kProxyAtomicTypeCount) return proxy_status::bad_atomic_type;
    const bool float_ok = r.atomic_op == proxy_atomic_op::fetch || r.atomic_op == proxy_atomic_op::set ||
                          r.atomic_op == proxy_atomic_op::swap || r.atomic_op == proxy_atomic_op::fetch_add ||
                          r.atomic_op == proxy_atomic_op::add;
    if (proxy_atomic_is_float(r.atomic_type) && !float_ok) return proxy_status::bad_type_for_op;
    const unsigned width = proxy_atomic_width(r.atomic_type);
    if (!in_heap(r.remote_offset, width, limits.heap_bytes)) return proxy_status::bad_offset;
    if (r.remote_offset % width != 0) return proxy_status::misaligned;
    if (proxy_atomic_fetches(r.atomic_op)) {
      if (r.completion >= kProxyMaxCompletionSlots || r.completion >= limits.completion_slots)
        return proxy_status::bad_completion;
    } else if (r.completion != 0) {
      return proxy_status::unused_field_set;
    }
    const std::uint64_t value_mask = width == 4 ? proxy_field_mask(32) : ~std::uint64_t{0};
    if (!proxy_atomic_has_operand(r.atomic_op) && r.value != 0) return proxy_status::unused_field_set;
    if ((r.value & ~value_mask) != 0) return proxy_status::unused_field_set;
    if (r.atomic_op != proxy_atomic_op::compare_swap && r.compare != 0) return proxy_status::unused_field_set;
    if ((r.compare & ~value_mask) != 0) return proxy_status::unused_field_set;
  }
  return proxy_status::ok;
}

// Packs a request. The status is ok or the first problem validate() finds (then the descriptor is zero).
SHOAL_HD constexpr proxy_encoded encode(const proxy_request& r) {
  proxy_encoded out{};
  out.status = validate(r);
  if (out.status != proxy_status::ok) return out;
  std::uint64_t header = 0;
  header |= std::uint64_t{static_cast<std::uint8_t>(r.op)} << kProxyOpShift;
  header |= std::uint64_t{static_cast<std::uint8_t>(r.atomic_op)} << kProxyAtomicOpShift;
  header |= std::uint64_t{static_cast<std::uint8_t>(r.atomic_type)} << kProxyAtomicTypeShift;
  header |= std::uint64_t{static_cast<std::uint8_t>(r.signal_op)} << kProxySignalOpShift;
  header |= ((r.local_is_address ? kProxyFlagLocalIsAddress : 0) | (r.local_is_host ? kProxyFlagLocalIsHost : 0) |
             (r.local_is_inline ? kProxyFlagLocalIsInline : 0))
            << kProxyFlagShift;
  header |= (static_cast<std::uint64_t>(r.pe) & proxy_field_mask(kProxyPeBits)) << kProxyPeShift;
  header |= std::uint64_t{r.completion} << kProxyCompletionShift;
  auto& w = out.descriptor.words;
  w[proxy_descriptor::kSequenceWord] = r.sequence;
  w[proxy_descriptor::kHeaderWord] = header;
  w[proxy_descriptor::kRemoteOffsetWord] = r.remote_offset;
  w[proxy_descriptor::kLocalWord] = r.local;
  w[proxy_descriptor::kSizeWord] = r.size;
  w[proxy_descriptor::kValueWord] = r.value;
  w[proxy_descriptor::kCompareWord] = r.compare;
  w[proxy_descriptor::kSignalOffsetWord] = r.signal_offset;
  return out;
}

// Unpacks and validates a descriptor against `limits`. Enumerators are range-checked before any cast, so
// arbitrary words decode to an error rather than to an out-of-range enum.
SHOAL_HD constexpr proxy_decoded decode(const proxy_descriptor& d, const proxy_limits& limits = {}) {
  proxy_decoded out{};
  const auto& w = d.words;
  const std::uint64_t header = w[proxy_descriptor::kHeaderWord];
  auto field = [header](unsigned shift, unsigned bits) { return (header >> shift) & proxy_field_mask(bits); };
  if ((header >> kProxyHeaderBits) != 0) return {out.request, proxy_status::reserved_bits_set};
  const std::uint64_t op = field(kProxyOpShift, kProxyOpBits);
  const std::uint64_t atomic_op = field(kProxyAtomicOpShift, kProxyAtomicOpBits);
  const std::uint64_t atomic_type = field(kProxyAtomicTypeShift, kProxyAtomicTypeBits);
  const std::uint64_t signal_op = field(kProxySignalOpShift, kProxySignalOpBits);
  const std::uint64_t flags = field(kProxyFlagShift, kProxyFlagBits);
  if (op >= kProxyOpCount) return {out.request, proxy_status::bad_op};
  if (atomic_op >= kProxyAtomicOpCount) return {out.request, proxy_status::bad_atomic_op};
  if (atomic_type >= kProxyAtomicTypeCount) return {out.request, proxy_status::bad_atomic_type};
  if (signal_op >= kProxySignalOpCount) return {out.request, proxy_status::bad_signal_op};
  if ((flags & ~kProxyFlagsKnown) != 0) return {out.request, proxy_status::reserved_bits_set};
  if (w[proxy_descriptor::kRemoteOffsetWord] > kProxyMaxOffset ||
      w[proxy_descriptor::kSignalOffsetWord] > kProxyMaxOffset)
    return {out.request, proxy_status::bad_offset};
  if (w[proxy_descriptor::kSizeWord] > kProxyMaxSize) return {out.request, proxy_status::bad_size};

  proxy_request& r = out.request;
  r.op = static_cast<proxy_op>(op);
  r.atomic_op = static_cast<proxy_atomic_op>(atomic_op);
  r.atomic_type = static_cast<proxy_atomic_type>(atomic_type);
  r.signal_op = static_cast<proxy_signal_op>(signal_op);
  r.local_is_address = (flags & kProxyFlagLocalIsAddress) != 0;
  r.local_is_host = (flags & kProxyFlagLocalIsHost) != 0;
  r.local_is_inline = (flags & kProxyFlagLocalIsInline) != 0;
  r.pe = static_cast<std::int32_t>(field(kProxyPeShift, kProxyPeBits));
  r.completion = static_cast<std::uint32_t>(field(kProxyCompletionShift, kProxyCompletionBits));
  r.sequence = w[proxy_descriptor::kSequenceWord];
  r.remote_offset = w[proxy_descriptor::kRemoteOffsetWord];
  r.local = w[proxy_descriptor::kLocalWord];
  r.size = w[proxy_descriptor::kSizeWord];
  r.value = w[proxy_descriptor::kValueWord];
  r.compare = w[proxy_descriptor::kCompareWord];
  r.signal_offset = w[proxy_descriptor::kSignalOffsetWord];
  out.status = validate(r, limits);
  return out;
}

}  // namespace shoal::detail
