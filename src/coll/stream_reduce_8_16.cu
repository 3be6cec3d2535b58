// On-stream reductions, element types: 8- and 16-bit integers (see stream_reduce.cuh).
#include "coll/stream_reduce.cuh"

namespace shoal {
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(std::int8_t)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(std::uint8_t)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(char)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(std::int16_t)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(std::uint16_t)
}  // namespace shoal
