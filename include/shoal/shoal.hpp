// The host API of shoal in one include: init/world and the symmetric heap, host-initiated RMA and
// atomics, stream-ordered operations, errors. Kernels include shoal/device.cuh.
#pragma once

#include "shoal/bootstrap.hpp"
#include "shoal/coll_stream.hpp"
#include "shoal/coll_types.hpp"
#include "shoal/device_handle.hpp"
#include "shoal/error.hpp"
#include "shoal/host_rma.hpp"
#include "shoal/stream.hpp"
#include "shoal/team.hpp"
#include "shoal/types.hpp"
#include "shoal/world.hpp"
