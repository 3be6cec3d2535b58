// The whole device API of shoal, for kernels: include this and pass a shoal::device_handle by value.
// Header-only; needs nvcc (C++20) and nothing at link time.
#pragma once

#include "shoal/dev/atomic.cuh"
#include "shoal/dev/barrier.cuh"
#include "shoal/dev/coll.cuh"
#include "shoal/dev/ordering.cuh"
#include "shoal/dev/rma.cuh"
#include "shoal/dev/scope.cuh"
#include "shoal/dev/signal.cuh"
#include "shoal/dev/wait.cuh"
#include "shoal/device_handle.hpp"
