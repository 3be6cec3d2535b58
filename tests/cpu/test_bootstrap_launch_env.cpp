// Launcher detection: each launcher's variables, the fallbacks, and the errors that say what is missing.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "bootstrap/launch_env.hpp"
#include "shoal/error.hpp"

namespace shoal::detail {
namespace {

using env = std::map<std::string, std::string>;

launch_info detect(const env& vars) {
  config::getenv_fn getenv = [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  return detect_launch(config::load(getenv), getenv);
}

// Expects a shoal::error of `category` whose message contains every one of `words`.
void expect_error(const env& vars, errc category, std::initializer_list<const char*> words) {
  try {
    detect(vars);
    FAIL() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.category(), category) << e.what();
    for (const char* w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << w << " not in: " << e.what();
  }
}

const std::string kSecret = "00112233445566778899aabbccddeeff";

TEST(BootstrapLaunchEnv, Shoalrun) {
  launch_info i = detect({{"SHOAL_RANK", "2"},
                          {"SHOAL_WORLD_SIZE", "4"},
                          {"SHOAL_LOCAL_RANK", "2"},
                          {"SHOAL_LOCAL_SIZE", "4"},
                          {"SHOAL_BOOTSTRAP_ADDR", "127.0.0.1:4567"},
                          {"SHOAL_BOOTSTRAP_SECRET", kSecret},
                          {"SHOAL_BOOTSTRAP_LISTEN_FD", "5"}});
  EXPECT_EQ(i.launcher, "shoalrun");
  EXPECT_EQ(i.pe, 2);
  EXPECT_EQ(i.n_pes, 4);
  EXPECT_EQ(i.local_pe, 2);
  EXPECT_EQ(i.local_size, 4);
  EXPECT_EQ(i.addr, "127.0.0.1:4567");
  EXPECT_EQ(i.secret, kSecret);
  EXPECT_FALSE(i.weak_secret);
  EXPECT_EQ(i.listen_fd, -1);  // only PE 0 serves the rendezvous
}

TEST(BootstrapLaunchEnv, ShoalrunPeZeroGetsTheListeningSocket) {
  launch_info i = detect({{"SHOAL_RANK", "0"},
                          {"SHOAL_WORLD_SIZE", "2"},
                          {"SHOAL_BOOTSTRAP_ADDR", "127.0.0.1:4567"},
                          {"SHOAL_BOOTSTRAP_SECRET", kSecret},
                          {"SHOAL_BOOTSTRAP_LISTEN_FD", "5"}});
  EXPECT_EQ(i.listen_fd, 5);
}

TEST(BootstrapLaunchEnv, ShoalrunIncomplete) {
  expect_error({{"SHOAL_RANK", "0"}, {"SHOAL_BOOTSTRAP_ADDR", "h:1"}, {"SHOAL_BOOTSTRAP_SECRET", kSecret}},
               errc::bootstrap, {"SHOAL_WORLD_SIZE", "shoalrun"});
  expect_error({{"SHOAL_RANK", "0"}, {"SHOAL_WORLD_SIZE", "2"}, {"SHOAL_BOOTSTRAP_SECRET", kSecret}}, errc::bootstrap,
               {"SHOAL_BOOTSTRAP_ADDR"});
  expect_error({{"SHOAL_RANK", "0"}, {"SHOAL_WORLD_SIZE", "2"}, {"SHOAL_BOOTSTRAP_ADDR", "h:1"}}, errc::bootstrap,
               {"SHOAL_BOOTSTRAP_SECRET"});
  expect_error({{"SHOAL_RANK", "4"},
                {"SHOAL_WORLD_SIZE", "4"},
                {"SHOAL_BOOTSTRAP_ADDR", "h:1"},
                {"SHOAL_BOOTSTRAP_SECRET", kSecret}},
               errc::bootstrap, {"SHOAL_RANK=4", "4"});
  expect_error({{"SHOAL_RANK", "x"}}, errc::config, {"SHOAL_RANK"});
}

TEST(BootstrapLaunchEnv, Torchrun) {
  env vars = {{"RANK", "3"},
              {"WORLD_SIZE", "8"},
              {"LOCAL_RANK", "1"},
              {"LOCAL_WORLD_SIZE", "2"},
              {"MASTER_ADDR", "10.0.0.5"},
              {"MASTER_PORT", "29500"},
              {"TORCHELASTIC_RUN_ID", "job-17"}};
  launch_info i = detect(vars);
  EXPECT_EQ(i.launcher, "torchrun");
  EXPECT_EQ(i.pe, 3);
  EXPECT_EQ(i.n_pes, 8);
  EXPECT_EQ(i.local_pe, 1);
  EXPECT_EQ(i.local_size, 2);
  EXPECT_EQ(i.addr, "10.0.0.5:29501");  // torchrun's own store has MASTER_PORT
  EXPECT_TRUE(i.weak_secret);
  EXPECT_EQ(i.secret.size(), 32u);
  // Every PE of the job derives the same secret; another run id gives another.
  vars["RANK"] = "0";
  EXPECT_EQ(detect(vars).secret, i.secret);
  vars["TORCHELASTIC_RUN_ID"] = "job-18";
  EXPECT_NE(detect(vars).secret, i.secret);
}

TEST(BootstrapLaunchEnv, TorchrunWithShoalOverrides) {
  launch_info i = detect({{"RANK", "0"},
                          {"WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "::1"},
                          {"MASTER_PORT", "29500"},
                          {"SHOAL_BOOTSTRAP_SECRET", kSecret}});
  EXPECT_EQ(i.addr, "[::1]:29501");
  EXPECT_EQ(i.secret, kSecret);
  EXPECT_FALSE(i.weak_secret);
  i = detect({{"RANK", "0"},
              {"WORLD_SIZE", "2"},
              {"MASTER_ADDR", "a"},
              {"MASTER_PORT", "1"},
              {"SHOAL_BOOTSTRAP_ADDR", "b:7"}});
  EXPECT_EQ(i.addr, "b:7");
}

TEST(BootstrapLaunchEnv, TorchrunIncomplete) {
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}}, errc::bootstrap,
               {"MASTER_ADDR", "torchrun"});
  expect_error({{"RANK", "0"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "29500"}}, errc::bootstrap, {"WORLD_SIZE"});
  expect_error({{"RANK", "zero"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}, errc::config,
               {"RANK"});
}

TEST(BootstrapLaunchEnv, Slurm) {
  env vars = {{"SLURM_PROCID", "5"},
              {"SLURM_NTASKS", "16"},
              {"SLURM_LOCALID", "1"},
              {"SLURM_JOB_ID", "4242"},
              {"SHOAL_BOOTSTRAP_ADDR", "node01:7000"}};
  launch_info i = detect(vars);
  EXPECT_EQ(i.launcher, "slurm");
  EXPECT_EQ(i.pe, 5);
  EXPECT_EQ(i.n_pes, 16);
  EXPECT_EQ(i.local_pe, 1);
  EXPECT_EQ(i.addr, "node01:7000");
  EXPECT_TRUE(i.weak_secret);
  vars["SLURM_JOB_ID"] = "4243";
  EXPECT_NE(detect(vars).secret, i.secret);
  vars.erase("SHOAL_BOOTSTRAP_ADDR");
  expect_error(vars, errc::bootstrap, {"SHOAL_BOOTSTRAP_ADDR", "Slurm"});
}

TEST(BootstrapLaunchEnv, SlurmSingleTaskNeedsNoAddress) {
  launch_info i = detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(i.n_pes, 1);
  EXPECT_EQ(i.addr, "127.0.0.1:0");
}

TEST(BootstrapLaunchEnv, OpenMpi) {
  launch_info i = detect({{"OMPI_COMM_WORLD_RANK", "1"},
                          {"OMPI_COMM_WORLD_SIZE", "2"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                          {"OMPI_MCA_ess_base_jobid", "99"},
                          {"SHOAL_BOOTSTRAP_ADDR", "10.1.1.1:9000"},
                          {"SHOAL_BOOTSTRAP_SECRET", kSecret}});
  EXPECT_EQ(i.launcher, "openmpi");
  EXPECT_EQ(i.pe, 1);
  EXPECT_EQ(i.n_pes, 2);
  EXPECT_EQ(i.secret, kSecret);
  expect_error({{"OMPI_COMM_WORLD_RANK", "1"}, {"SHOAL_BOOTSTRAP_ADDR", "h:1"}}, errc::bootstrap,
               {"OMPI_COMM_WORLD_SIZE", "Open MPI"});
}

// mpirun started inside a Slurm allocation: every rank inherits the batch step's SLURM_PROCID=0, so
// only Open MPI's own variables tell the ranks apart.
TEST(BootstrapLaunchEnv, OpenMpiInsideASlurmAllocation) {
  launch_info i = detect({{"OMPI_COMM_WORLD_RANK", "3"},
                          {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"SLURM_PROCID", "0"},
                          {"SLURM_NTASKS", "1"},
                          {"SLURM_JOB_ID", "4242"},
                          {"SHOAL_BOOTSTRAP_ADDR", "10.1.1.1:9000"}});
  EXPECT_EQ(i.launcher, "openmpi");
  EXPECT_EQ(i.pe, 3);
  EXPECT_EQ(i.n_pes, 4);
}

// A Slurm script that exports MASTER_ADDR and MASTER_PORT for torch.distributed and starts its tasks
// with srun: without RANK or TORCHELASTIC_RUN_ID this is not a torchrun launch.
TEST(BootstrapLaunchEnv, SlurmWithTorchRendezvousVariables) {
  launch_info i = detect({{"MASTER_ADDR", "node01"},
                          {"MASTER_PORT", "29500"},
                          {"SLURM_PROCID", "1"},
                          {"SLURM_NTASKS", "2"},
                          {"SHOAL_BOOTSTRAP_ADDR", "node01:7000"}});
  EXPECT_EQ(i.launcher, "slurm");
  EXPECT_EQ(i.pe, 1);
  EXPECT_EQ(i.n_pes, 2);
}

TEST(BootstrapLaunchEnv, ShoalrunWinsOverOthers) {
  launch_info i = detect({{"SHOAL_RANK", "1"},
                          {"SHOAL_WORLD_SIZE", "2"},
                          {"SHOAL_BOOTSTRAP_ADDR", "127.0.0.1:1"},
                          {"SHOAL_BOOTSTRAP_SECRET", kSecret},
                          {"RANK", "0"},
                          {"SLURM_PROCID", "7"}});
  EXPECT_EQ(i.launcher, "shoalrun");
  EXPECT_EQ(i.pe, 1);
}

TEST(BootstrapLaunchEnv, NothingIsASingleProcess) {
  launch_info i = detect({});
  EXPECT_EQ(i.launcher, "single process");
  EXPECT_EQ(i.pe, 0);
  EXPECT_EQ(i.n_pes, 1);
}

TEST(BootstrapLaunchEnv, AnAddressWithoutALauncherNamesWhatWasLookedFor) {
  expect_error({{"SHOAL_BOOTSTRAP_ADDR", "h:1"}}, errc::bootstrap,
               {"SHOAL_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"});
}

TEST(BootstrapLaunchEnv, DerivedSecretsSeparateParts) {
  EXPECT_NE(derive_secret({"ab", "c"}), derive_secret({"a", "bc"}));
  EXPECT_EQ(derive_secret({"x"}), derive_secret({"x"}));
  EXPECT_EQ(derive_secret({"x"}).size(), 32u);
}

}  // namespace
}  // namespace shoal::detail
