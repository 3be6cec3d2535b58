// On-stream reductions, element types: float, double (see stream_reduce.cuh).
#include "coll/stream_reduce.cuh"

namespace shoal {
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(float)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(double)
}  // namespace shoal
