// SHOAL_HD marks functions callable from host and device code: __host__ __device__ under nvcc,
// nothing under a plain host compiler, so one header serves both.
#pragma once

#if defined(__CUDACC__)
#define SHOAL_HD __host__ __device__
#else
#define SHOAL_HD
#endif
