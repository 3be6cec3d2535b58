// The copy-engine copy behind the host forms of put and get (blocking and on a stream): one side a symmetric
// range shoal has checked, the other the caller's own local buffer, which shoal cannot size beforehand.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace shoal::detail {

// Which side of the copy is the caller's local buffer.
enum class local_side { source, destination };

// Enqueues cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault) on `stream`. CUDA refuses, as an invalid
// argument, a copy whose range runs past the end of its device or pinned allocation (the context lives on).
// The symmetric side is checked already, so that names the local buffer: this throws
// shoal::error(errc::invalid_argument) naming `call`, the buffer and where its memory ends. Any other failure
// throws errc::cuda as SHOAL_CUDA_CHECK does. Either way the runtime's last-error state is cleared, so the
// refusal does not resurface in the next call that checks it (a kernel launch, say).
void copy_with_local_buffer(void* dst, const void* src, std::size_t bytes, local_side local, cudaStream_t stream,
                            const char* call);

}  // namespace shoal::detail
