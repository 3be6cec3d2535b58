// How PEs find each other and exchange small host data before (and beside) the GPU paths exist.
// shoal::init builds one from the launcher's environment; a user may pass their own (MPI, external
// callbacks) or start from a unique id made by PE 0 and handed to the others (the NCCL-style path).
// Every call here is collective over the PEs named in its comment and bounded by SHOAL_BOOTSTRAP_TIMEOUT:
// a PE that is missing or dead past it becomes a shoal::error (errc::peer_failure or errc::timeout)
// naming that PE on every survivor, never a hang.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace shoal {

// Calls may come from any thread, one collective at a time per object; every PE must call the
// collectives in the same order with matching sizes and roots (a mismatch is an error on all PEs).
class bootstrap {
 public:
  virtual ~bootstrap() = default;

  // Place of this PE in the job. Nodes group the PEs that may map each other's memory: the same host
  // (SHOAL_NODE_ID overrides the identity), further split by SHOAL_EMULATE_NODES.
  virtual int pe() const noexcept = 0;
  virtual int n_pes() const noexcept = 0;
  virtual int node() const noexcept = 0;
  virtual int n_nodes() const noexcept = 0;
  virtual int local_pe() const noexcept = 0;    // index of this PE among its node's PEs
  virtual int local_size() const noexcept = 0;  // PEs on this PE's node
  // World PE numbers of this PE's node, in local_pe order.
  virtual std::span<const int> node_pes() const noexcept = 0;
  // Index of this PE among the PEs of its host, which picks its GPU. The same as local_pe() unless
  // SHOAL_EMULATE_NODES splits the host into several nodes.
  virtual int host_pe() const noexcept { return local_pe(); }

  // All PEs. `all` receives n_pes() blocks of `bytes` each, block p from PE p.
  virtual void all_gather(const void* mine, void* all, std::size_t bytes) = 0;
  // All PEs. `data` (bytes long on every PE) is overwritten with root's.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // All PEs. Returns once every PE has entered.
  virtual void barrier() = 0;
  // All PEs. Block q of `send` goes to PE q; block p of `recv` comes from PE p. Blocks are `bytes` long.
  virtual void alltoall(const void* send, void* recv, std::size_t bytes) = 0;

  // Point to point among the PEs of one node, over Unix-domain sockets with SCM_RIGHTS. The receiver
  // gets new descriptors (owned by the caller) for the same open files. `local_peer` is a local_pe.
  // Messages from one sender arrive in the order sent; a recv_fds for one sender never consumes
  // another sender's message. A recv_fds whose descriptors could not all be installed (the process is at
  // its limit of open files) throws and closes the ones that were; the next recv_fds from that sender
  // gets the descriptors sent after them.
  virtual void send_fds(int local_peer, std::span<const int> fds) = 0;
  virtual std::vector<int> recv_fds(int local_peer, std::size_t count) = 0;
};

// Opaque rendezvous token for the NCCL-style start: PE 0 makes it, the caller hands it to every PE.
struct unique_id {
  std::array<std::byte, 128> bytes{};
};

// PE 0 only: reserves a rendezvous address on this host and a fresh secret.
unique_id make_unique_id();

// Detects the launcher from the environment, first match wins: shoalrun (SHOAL_*), torchrun (RANK or
// TORCHELASTIC_RUN_ID set; reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
// the rendezvous is SHOAL_BOOTSTRAP_ADDR or MASTER_ADDR:MASTER_PORT+1), Open MPI (OMPI_COMM_WORLD_*) or
// Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), the latter two with SHOAL_BOOTSTRAP_ADDR. Without SHOAL_BOOTSTRAP_SECRET the
// secret of the last three is derived from job variables: it keeps jobs apart, not attackers out.
// With no launcher variable at all, the process is a job of 1 PE. Throws shoal::error (errc::bootstrap)
// saying what it looked for and what is missing when a launcher's variables are incomplete.
std::unique_ptr<bootstrap> make_bootstrap_from_env();

// The NCCL-style start: every PE calls this with the same id, its own pe, and the same n_pes.
std::unique_ptr<bootstrap> make_bootstrap(const unique_id& id, int pe, int n_pes);

}  // namespace shoal
