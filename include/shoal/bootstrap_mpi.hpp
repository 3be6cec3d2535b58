// A bootstrap over a user's MPI communicator, for programs that already run under MPI:
//
//   MPI_Init(&argc, &argv);
//   shoal::world w = shoal::init({.bootstrap = shoal::make_mpi_bootstrap(MPI_COMM_WORLD)});
//   ...                      // the world ends (its destructor) before MPI_Finalize
//   MPI_Finalize();
//
// Available when shoal was built with MPI (CMake found it; SHOAL_WITH_MPI, on by default). Needs
// <mpi.h>. A plain `mpirun ... prog` also works without this: shoal::init reads Open MPI's environment
// (docs/getting-started.md).
#pragma once

#include <mpi.h>

#include <memory>

#include "shoal/bootstrap.hpp"

namespace shoal {

// Collective over `comm`: every process of it calls, and each becomes the PE of its rank. The
// communicator is duplicated, so shoal's traffic never matches the caller's messages; MPI must be
// initialized now and stay so until the bootstrap (the world made with it) is destroyed. Nodes group the
// processes by host name (SHOAL_NODE_ID overrides it), split by SHOAL_EMULATE_NODES, as the default
// bootstrap does; node-local processes pass descriptors over Unix-domain sockets. Every call checks MPI's
// return code and throws shoal::error(errc::bootstrap) naming the MPI call.
std::unique_ptr<bootstrap> make_mpi_bootstrap(MPI_Comm comm);

}  // namespace shoal
