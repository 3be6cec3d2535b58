// On-stream reductions, element types: 32- and 64-bit integers (see stream_reduce.cuh).
#include "coll/stream_reduce.cuh"

namespace shoal {
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(std::int32_t)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(std::uint32_t)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(long)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(unsigned long)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(long long)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(unsigned long long)
}  // namespace shoal
