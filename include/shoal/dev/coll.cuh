// Team collectives inside a kernel: barrier, sync, broadcast, fcollect, alltoall, reduce (all-reduce)
// and reducescatter, at thread, warp, block and grid scope. They are built on the public device API
// (ptr, flags, fences) and take a shoal::team_handle by value.
#pragma once

#include "shoal/dev/coll/barrier.cuh"
#include "shoal/dev/coll/exchange.cuh"
#include "shoal/dev/coll/reduce.cuh"
#include "shoal/dev/team.cuh"
#include "shoal/team_handle.hpp"
