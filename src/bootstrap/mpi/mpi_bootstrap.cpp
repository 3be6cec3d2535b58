// shoal::make_mpi_bootstrap (shoal/bootstrap_mpi.hpp): the bootstrap's collectives as MPI collectives on
// a duplicate of the caller's communicator, node grouping as the default bootstrap does it, and
// descriptor passing over the same Unix-domain channel (fd_channel.hpp).
#include "shoal/bootstrap_mpi.hpp"

#include <fmt/format.h>

#include <climits>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/config.hpp"
#include "bootstrap/fd_channel.hpp"
#include "bootstrap/placed_bootstrap.hpp"
#include "bootstrap/socket.hpp"
#include "shoal/error.hpp"

namespace shoal {
namespace {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) std::snprintf(text, sizeof text, "error %d", rc);
  throw error(errc::bootstrap, "mpi bootstrap", fmt::format("{} failed: {}", call, text));
}

// MPI counts are int: larger blocks are refused rather than truncated.
int count_of(std::size_t bytes, const char* call) {
  if (bytes > static_cast<std::size_t>(INT_MAX))
    throw error(errc::invalid_argument, call, fmt::format("{} bytes per PE is more than MPI can count", bytes));
  return static_cast<int>(bytes);
}

// Fixed-size text fields for the start-up all_gather.
constexpr std::size_t kField = 256;
struct identity {
  char host[kField];
  char fd_socket[kField];
};

class mpi_bootstrap final : public detail::placed_bootstrap {
 public:
  explicit mpi_bootstrap(MPI_Comm comm) {
    int initialized = 0;
    check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
    if (!initialized) throw error(errc::bootstrap, "make_mpi_bootstrap", "MPI is not initialized (call MPI_Init first)");
    check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    try {
      join();
    } catch (...) {
      MPI_Comm_free(&comm_);  // the destructor does not run for a constructor that throws
      throw;
    }
  }

  ~mpi_bootstrap() override {
    int finalized = 0;
    if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Comm_free(&comm_);
  }

 private:
  // Collective over comm_: learns this PE's place, draws the job's secret, opens the descriptor channel
  // and gathers every PE's host and channel name.
  void join() {
    check_mpi(MPI_Comm_rank(comm_, &pe_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &n_pes_), "MPI_Comm_size");
    const detail::config cfg = detail::config::load();
    timeout_s_ = cfg.bootstrap_timeout;

    // The secret names this job's descriptor sockets: PE 0 draws it, everyone gets it.
    char secret[33] = {};
    if (pe_ == 0) {
      std::random_device rd;
      std::snprintf(secret, sizeof secret, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
    }
    check_mpi(MPI_Bcast(secret, sizeof secret, MPI_CHAR, 0, comm_), "MPI_Bcast");
    fds_ = std::make_unique<detail::fd_channel>(secret, pe_);

    // A name too long for its field goes out empty, and every PE fails after the gather: throwing before
    // it would leave the other PEs waiting in MPI_Allgather for good.
    identity mine{};
    const std::string host = cfg.node_id.empty() ? detail::host_name() : cfg.node_id;
    const bool fits = !host.empty() && host.size() < kField && fds_->name().size() < kField;
    if (fits) {
      std::memcpy(mine.host, host.data(), host.size());
      std::memcpy(mine.fd_socket, fds_->name().data(), fds_->name().size());
    }
    std::vector<identity> all(static_cast<std::size_t>(n_pes_));
    all_gather(&mine, all.data(), sizeof mine);
    if (!fits)
      throw error(errc::bootstrap, "make_mpi_bootstrap",
                  fmt::format("host name '{}' is empty or longer than {} bytes (set SHOAL_NODE_ID)", host, kField - 1));
    for (int pe = 0; pe < n_pes_; ++pe)
      if (all[static_cast<std::size_t>(pe)].host[0] == '\0')
        throw error(errc::bootstrap, "make_mpi_bootstrap",
                    fmt::format("PE {}'s host name is empty or too long (its own error says which)", pe));

    std::vector<std::string> hosts;
    for (const identity& id : all) {
      hosts.emplace_back(id.host);
      fd_sockets_.emplace_back(id.fd_socket);
    }
    placement_ = detail::place_pe(hosts, static_cast<int>(cfg.emulate_nodes), pe_);
  }

 public:
  int pe() const noexcept override { return pe_; }
  int n_pes() const noexcept override { return n_pes_; }

  void all_gather(const void* mine, void* all, std::size_t bytes) override {
    const int n = count_of(bytes, "bootstrap all_gather");
    check_mpi(MPI_Allgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, comm_), "MPI_Allgather");
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    if (root < 0 || root >= n_pes_)
      throw error(errc::invalid_argument, "bootstrap broadcast",
                  fmt::format("root {} is out of range [0, {})", root, n_pes_));
    check_mpi(MPI_Bcast(data, count_of(bytes, "bootstrap broadcast"), MPI_BYTE, root, comm_), "MPI_Bcast");
  }

  void barrier() override { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

  void alltoall(const void* send, void* recv, std::size_t bytes) override {
    const int n = count_of(bytes, "bootstrap alltoall");
    check_mpi(MPI_Alltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_), "MPI_Alltoall");
  }

  void send_fds(int local_peer, std::span<const int> fds) override {
    const int to = world_pe_of(local_peer, "bootstrap send_fds");
    fds_->send(to, fd_sockets_[static_cast<std::size_t>(to)], fds, detail::deadline::after(timeout_s_));
  }

  std::vector<int> recv_fds(int local_peer, std::size_t count) override {
    const int from = world_pe_of(local_peer, "bootstrap recv_fds");
    return fds_->recv(from, count, detail::deadline::after(timeout_s_));
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int pe_ = 0;
  int n_pes_ = 1;
  double timeout_s_ = 60;
  std::unique_ptr<detail::fd_channel> fds_;
  std::vector<std::string> fd_sockets_;  // every PE's descriptor socket
};

}  // namespace

std::unique_ptr<bootstrap> make_mpi_bootstrap(MPI_Comm comm) { return std::make_unique<mpi_bootstrap>(comm); }

}  // namespace shoal
