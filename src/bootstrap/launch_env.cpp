#include "bootstrap/launch_env.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

constexpr const char* kLookedFor =
    "looked for SHOAL_RANK + SHOAL_WORLD_SIZE (shoalrun), RANK + WORLD_SIZE + MASTER_ADDR + MASTER_PORT (torchrun), "
    "OMPI_COMM_WORLD_RANK + OMPI_COMM_WORLD_SIZE (Open MPI), SLURM_PROCID + SLURM_NTASKS (Slurm)";

// Environment access with the missing-variable errors of one launcher.
class env_reader {
 public:
  env_reader(const config::getenv_fn& getenv, std::string_view launcher) : getenv_(getenv), launcher_(launcher) {}

  const char* raw(const char* name) const {
    const char* v = getenv_(name);
    return v && *v ? v : nullptr;
  }
  std::string text(const char* name) const {
    const char* v = raw(name);
    if (!v) missing(name);
    return v;
  }
  int integer(const char* name, std::int64_t lo, std::int64_t hi) const {
    std::int64_t v = parse_integer(name, text(name));
    if (v < lo || v > hi) throw error(errc::config, name, fmt::format("{} is out of range {}..{}", v, lo, hi));
    return static_cast<int>(v);
  }
  int integer_or(const char* name, int fallback) const { return raw(name) ? integer(name, 0, 1 << 20) : fallback; }
  [[noreturn]] void missing(std::string_view what) const {
    throw error(errc::bootstrap, "make_bootstrap_from_env",
                fmt::format("this looks like a {} launch but {} is not set ({})", launcher_, what, kLookedFor));
  }

 private:
  const config::getenv_fn& getenv_;
  std::string_view launcher_;
};

void check_pe(const launch_info& info, const char* pe_var) {
  if (info.pe >= info.n_pes)
    throw error(
        errc::bootstrap, "make_bootstrap_from_env",
        fmt::format("{}={} is not below the job size {} ({} launch)", pe_var, info.pe, info.n_pes, info.launcher));
}

launch_info from_shoalrun(const config& cfg, const env_reader& env) {
  launch_info info{.launcher = "shoalrun"};
  if (cfg.rank < 0) env.missing("SHOAL_RANK");
  if (cfg.world_size < 1) env.missing("SHOAL_WORLD_SIZE");
  if (cfg.bootstrap_addr.empty()) env.missing("SHOAL_BOOTSTRAP_ADDR");
  if (cfg.bootstrap_secret.empty()) env.missing("SHOAL_BOOTSTRAP_SECRET");
  info.pe = static_cast<int>(cfg.rank);
  info.n_pes = static_cast<int>(cfg.world_size);
  info.local_pe = static_cast<int>(cfg.local_rank);
  info.local_size = static_cast<int>(cfg.local_size);
  info.addr = cfg.bootstrap_addr;
  info.secret = cfg.bootstrap_secret;
  info.listen_fd = info.pe == 0 ? static_cast<int>(cfg.bootstrap_listen_fd) : -1;
  check_pe(info, "SHOAL_RANK");
  return info;
}

launch_info from_torchrun(const config& cfg, const env_reader& env) {
  launch_info info{.launcher = "torchrun"};
  info.pe = env.integer("RANK", 0, 1 << 20);
  info.n_pes = env.integer("WORLD_SIZE", 1, 1 << 20);
  info.local_pe = env.integer_or("LOCAL_RANK", -1);
  info.local_size = env.integer_or("LOCAL_WORLD_SIZE", -1);
  std::string master = env.text("MASTER_ADDR");
  std::string port_text = env.text("MASTER_PORT");
  if (!cfg.bootstrap_addr.empty()) {
    info.addr = cfg.bootstrap_addr;
  } else {
    int port = env.integer("MASTER_PORT", 1, 65534);
    info.addr = master.find(':') != std::string::npos ? fmt::format("[{}]:{}", master, port + 1)
                                                      : fmt::format("{}:{}", master, port + 1);
  }
  if (!cfg.bootstrap_secret.empty()) {
    info.secret = cfg.bootstrap_secret;
  } else {
    const char* run_id = env.raw("TORCHELASTIC_RUN_ID");
    info.secret = derive_secret({"torchrun", run_id ? run_id : "", master, port_text, std::to_string(info.n_pes)});
    info.weak_secret = true;
  }
  check_pe(info, "RANK");
  return info;
}

// Slurm and Open MPI give the PE numbers but no rendezvous: SHOAL_BOOTSTRAP_ADDR names it, except that
// a one-task job needs none.
launch_info from_scheduler(const config& cfg, const env_reader& env, std::string launcher, const char* pe_var,
                           const char* size_var, const char* local_var, std::initializer_list<const char*> job_vars) {
  launch_info info{.launcher = std::move(launcher)};
  info.pe = env.integer(pe_var, 0, 1 << 20);
  info.n_pes = env.integer(size_var, 1, 1 << 20);
  info.local_pe = env.integer_or(local_var, -1);
  check_pe(info, pe_var);
  if (cfg.bootstrap_addr.empty()) {
    if (info.n_pes > 1) env.missing("SHOAL_BOOTSTRAP_ADDR (the host:port of PE 0's rendezvous)");
    info.addr = "127.0.0.1:0";
    return info;  // one task: a fresh random secret will do
  }
  info.addr = cfg.bootstrap_addr;
  if (!cfg.bootstrap_secret.empty()) {
    info.secret = cfg.bootstrap_secret;
  } else {
    std::string job;
    for (const char* var : job_vars)
      if (const char* v = env.raw(var)) job += fmt::format("{}={};", var, v);
    info.secret = derive_secret({info.launcher, job, info.addr, std::to_string(info.n_pes)});
    info.weak_secret = true;
  }
  return info;
}

}  // namespace

std::string derive_secret(std::initializer_list<std::string_view> parts) {
  // Two FNV-1a streams with different bases, each finished by a splitmix64 mix. Not cryptographic: it
  // only has to make the secrets of different jobs differ.
  std::uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  for (std::string_view part : parts) {
    for (unsigned char c : part) {
      a = (a ^ c) * 0x100000001b3ull;
      b = (b ^ c) * 0x100000001b3ull ^ (b >> 29);
    }
    a = (a ^ 0xff) * 0x100000001b3ull;  // separator, so ("ab","c") differs from ("a","bc")
    b = (b ^ 0xfe) * 0x100000001b3ull;
  }
  auto mix = [](std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  return fmt::format("{:016x}{:016x}", mix(a), mix(b ^ a));
}

launch_info detect_launch(const config& cfg, const config::getenv_fn& getenv) {
  auto has = [&](const char* name) {
    const char* v = getenv(name);
    return v && *v;
  };
  if (cfg.rank >= 0 || cfg.world_size >= 0) return from_shoalrun(cfg, env_reader(getenv, "shoalrun"));
  // RANK or the run id, not MASTER_ADDR or WORLD_SIZE: scripts export those two for torch.distributed
  // under other launchers too.
  if (has("RANK") || has("TORCHELASTIC_RUN_ID")) return from_torchrun(cfg, env_reader(getenv, "torchrun"));
  // Open MPI before Slurm: mpirun inside a Slurm allocation passes the batch step's SLURM_PROCID (0 for
  // every rank) and SLURM_NTASKS on to its ranks.
  if (has("OMPI_COMM_WORLD_RANK"))
    return from_scheduler(cfg, env_reader(getenv, "Open MPI"), "openmpi", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                          {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid"});
  if (has("SLURM_PROCID"))
    return from_scheduler(cfg, env_reader(getenv, "Slurm"), "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                          {"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_CLUSTER_NAME"});
  // No launcher. A rendezvous address alone means someone meant to start a job and forgot the PE numbers.
  if (!cfg.bootstrap_addr.empty() || cfg.bootstrap_listen_fd >= 0)
    throw error(errc::bootstrap, "make_bootstrap_from_env",
                fmt::format("SHOAL_BOOTSTRAP_ADDR is set but no launcher says which PE this is ({})", kLookedFor));
  launch_info info{.launcher = "single process", .pe = 0, .n_pes = 1, .local_pe = 0, .local_size = 1};
  info.addr = "127.0.0.1:0";
  info.secret = cfg.bootstrap_secret;
  return info;
}

}  // namespace shoal::detail
