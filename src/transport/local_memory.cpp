#include "transport/local_memory.hpp"

#include <atomic>
#include <cstring>
#include <string>

#include "shoal/error.hpp"

namespace shoal::detail {

namespace {

template <typename T>
T apply(T* word, proxy_atomic_op op, T value, T compare) {
  std::atomic_ref<T> ref(*word);
  switch (op) {
    case proxy_atomic_op::fetch:
      return ref.load();
    case proxy_atomic_op::set:
    case proxy_atomic_op::swap:
      return ref.exchange(value);
    case proxy_atomic_op::compare_swap:
      ref.compare_exchange_strong(compare, value);
      return compare;  // the old value whether or not it matched
    case proxy_atomic_op::fetch_add:
    case proxy_atomic_op::add:
      return ref.fetch_add(value);
    case proxy_atomic_op::fetch_and:
    case proxy_atomic_op::bit_and:
      return ref.fetch_and(value);
    case proxy_atomic_op::fetch_or:
    case proxy_atomic_op::bit_or:
      return ref.fetch_or(value);
    case proxy_atomic_op::fetch_xor:
    case proxy_atomic_op::bit_xor:
      return ref.fetch_xor(value);
  }
  throw error(errc::internal, "host_atomic_apply", "unknown atomic op " + std::to_string(static_cast<int>(op)));
}

}  // namespace

// Floating-point add, as a compare-and-swap loop on the bit pattern of width W.
template <typename F, typename W>
W float_add(W* word, W operand_bits) {
  std::atomic_ref<W> ref(*word);
  F operand;
  std::memcpy(&operand, &operand_bits, sizeof(F));
  W old = ref.load();
  for (;;) {
    F value;
    std::memcpy(&value, &old, sizeof(F));
    value += operand;
    W next;
    std::memcpy(&next, &value, sizeof(F));
    if (ref.compare_exchange_weak(old, next)) return old;
  }
}

std::uint64_t host_atomic_apply(void* word, const local_atomic& op) {
  const bool adds = op.op == proxy_atomic_op::fetch_add || op.op == proxy_atomic_op::add;
  if (op.type == proxy_atomic_type::float32 && adds)
    return float_add<float>(static_cast<std::uint32_t*>(word), static_cast<std::uint32_t>(op.value));
  if (op.type == proxy_atomic_type::float64 && adds)
    return float_add<double>(static_cast<std::uint64_t*>(word), op.value);
  // Float fetch/set/swap are bit moves, so integer atomics of the same width do them exactly.
  if (proxy_atomic_width(op.type) == 4)
    return apply(static_cast<std::uint32_t*>(word), op.op, static_cast<std::uint32_t>(op.value),
                 static_cast<std::uint32_t>(op.compare));
  return apply(static_cast<std::uint64_t*>(word), op.op, op.value, op.compare);
}

host_local_memory::host_local_memory(void* base, std::uint64_t bytes, const host_memory_knobs& knobs)
    : base_(static_cast<std::byte*>(base)),
      bytes_(bytes),
      deferred_flushes_(knobs.deferred_flushes),
      before_flush_begin_(knobs.before_flush_begin),
      flushes_held_(knobs.flushes_held) {
  if (base == nullptr && bytes != 0) throw error(errc::invalid_argument, "host_local_memory", "null heap base");
  if (reinterpret_cast<std::uintptr_t>(base) % 8 != 0)
    throw error(errc::invalid_argument, "host_local_memory", "heap base not 8-byte aligned");
  if (knobs.slots != 0 && knobs.slot_bytes != 0) {
    lend_storage_ = std::make_unique<std::byte[]>(knobs.slots * knobs.slot_bytes);
    lendable_ = payload_pool(lend_storage_.get(), knobs.slot_bytes, knobs.slots);
  }
}

// Takes the window over only when this memory lends at all (the test knobs), in slots of the same size.
bool host_local_memory::lend_from(std::span<std::byte> memory) {
  if (!lendable_.move_to(memory)) return false;
  lend_storage_.reset();
  return true;
}

std::byte* host_local_memory::resolve(local_ref ref, std::size_t bytes, const char* call) const {
  if (ref.is_address) return reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(ref.value));
  if (ref.value > bytes_ || bytes > bytes_ - ref.value)
    throw error(errc::internal, call,
                "heap range [" + std::to_string(ref.value) + ", +" + std::to_string(bytes) + ") beyond the heap of " +
                    std::to_string(bytes_) + " bytes");
  return base_ + ref.value;
}

void host_local_memory::read(local_ref from, void* to, std::size_t bytes) {
  if (bytes != 0) std::memcpy(to, resolve(from, bytes, "host_local_memory::read"), bytes);
}

void host_local_memory::write(local_ref to, const void* from, std::size_t bytes) {
  if (bytes != 0) std::memcpy(resolve(to, bytes, "host_local_memory::write"), from, bytes);
}

void host_local_memory::atomic(std::uint64_t offset, const local_atomic& op, std::uint64_t* old) {
  const unsigned width = proxy_atomic_width(op.type);
  std::byte* word = resolve(local_ref::heap(offset), width, "host_local_memory::atomic");
  if (offset % width != 0) throw error(errc::internal, "host_local_memory::atomic", "misaligned atomic word");
  *old = host_atomic_apply(word, op);
}

void host_local_memory::signal(std::uint64_t offset, proxy_signal_op op, std::uint64_t value) {
  std::byte* word = resolve(local_ref::heap(offset), 8, "host_local_memory::signal");
  if (offset % 8 != 0) throw error(errc::internal, "host_local_memory::signal", "misaligned signal word");
  // seq_cst (so release): the data writes issued before this signal are visible to whoever sees it.
  std::atomic_ref<std::uint64_t> ref(*reinterpret_cast<std::uint64_t*>(word));
  if (op == proxy_signal_op::add)
    ref.fetch_add(value);
  else
    ref.store(value);
}

}  // namespace shoal::detail
