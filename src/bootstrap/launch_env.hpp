// Which launcher started this process, and what it tells us: a pure function of the environment
// (read through a callback) so every launcher's case is unit-tested without touching the real one.
#pragma once

#include <string>
#include <string_view>

#include "base/config.hpp"

namespace shoal::detail {

struct launch_info {
  std::string launcher;  // "shoalrun", "torchrun", "slurm", "openmpi" or "single process"
  int pe = 0;
  int n_pes = 1;
  int local_pe = -1;    // as the launcher numbers them; -1 when it does not say (informational only:
  int local_size = -1;  // nodes are grouped from the host identities every PE reports)
  std::string addr;     // host:port of the hub in PE 0; port 0 (single process) means any free port
  // Empty: make a fresh random one (single process). A derived secret (weak_secret) is computed from
  // job variables that anyone who can read the job's environment or the scheduler's queue can recompute:
  // it keeps unrelated jobs apart but is not a protection against a local attacker.
  std::string secret;
  bool weak_secret = false;
  int listen_fd = -1;  // PE 0 under shoalrun: an already-listening socket bound to `addr`
};

// Recognises, in order: shoalrun (SHOAL_RANK, SHOAL_WORLD_SIZE, ...), torchrun (when RANK or
// TORCHELASTIC_RUN_ID is set; reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; the hub uses
// SHOAL_BOOTSTRAP_ADDR or MASTER_PORT + 1, since torchrun's own store listens on MASTER_PORT), Open MPI
// (OMPI_COMM_WORLD_*) and Slurm (SLURM_PROCID, SLURM_NTASKS), the last two with SHOAL_BOOTSTRAP_ADDR (not
// needed for a 1-task job). Open MPI comes before Slurm because mpirun inside a Slurm allocation passes the
// allocation's SLURM_* variables on to every rank. With no launcher variable at all the
// process is a 1-PE job. A partial or inconsistent set throws shoal::error(errc::bootstrap) naming what
// was found and what is missing. `cfg` is the SHOAL_* configuration read through the same `getenv`.
launch_info detect_launch(const config& cfg, const config::getenv_fn& getenv);

// 32 hex digits derived from job-identifying strings (see launch_info::secret for why it is weak).
std::string derive_secret(std::initializer_list<std::string_view> parts);

}  // namespace shoal::detail
