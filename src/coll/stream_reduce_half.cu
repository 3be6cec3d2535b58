// On-stream reductions, element types: __half, __nv_bfloat16 (see stream_reduce.cuh).
#include "coll/stream_reduce.cuh"

namespace shoal {
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(__half)
SHOAL_INSTANTIATE_REDUCE_ON_STREAM(__nv_bfloat16)
}  // namespace shoal
