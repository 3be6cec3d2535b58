// Launcher suite: runs the real shoalrun binary on launcher_probe and checks exit status and output.
// No GPU. No time bound is asserted: a hung shoalrun fails its test at kHardLimit, and how the ranks were
// stopped (SIGTERM, then SIGKILL after the grace period) is read from shoalrun's own notes.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;

const std::string kShoalrun = SHOAL_TEST_SHOALRUN;
const std::string kProbe = SHOAL_TEST_PROBE;
constexpr auto kHardLimit = std::chrono::seconds(20);  // a hung shoalrun fails the test, never the suite

struct run_result {
  int exit_code = -1;  // -1 when shoalrun itself was killed by a signal
  int term_signal = 0;
  bool hung = false;
  std::string out;
  std::string err;
  double seconds = 0;
};

// Called whenever new output arrived, with shoalrun's pid and all output so far.
using output_hook = std::function<void(pid_t, const std::string& out, const std::string& err)>;

// Runs in the child between fork and execve, after its stdout and stderr are set: may change its stdin
// or its session. The test process is single-threaded there, so any call will do.
using child_hook = std::function<void()>;

// Runs `command` (the program and its arguments) with `extra_env` ("NAME=value", overriding the
// inherited environment) until it exits and both of its output streams are closed.
run_result run_command(const std::vector<std::string>& command, const std::vector<std::string>& extra_env = {},
                       const output_hook& hook = {}, const child_hook& in_child = {}) {
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const std::string& extra : extra_env) overridden |= extra.substr(0, extra.find('=')) == name;
    if (!overridden) env_storage.push_back(entry);
  }
  env_storage.insert(env_storage.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = command;
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  EXPECT_EQ(::pipe2(out_pipe, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);
  auto start = steady::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    if (in_child) in_child();
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  run_result result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_streams = 2;
  while (open_streams > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(start + kHardLimit - steady::now()).count();
    if (left <= 0) {
      result.hung = true;
      ::kill(pid, SIGKILL);
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left)) < 0 && errno != EINTR) break;
    bool grew = false;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
        grew = true;
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_streams;
      }
    }
    if (grew && hook) hook(pid, result.out, result.err);
  }
  for (pollfd& p : fds)
    if (p.fd >= 0) ::close(p.fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.seconds = std::chrono::duration<double>(steady::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  return result;
}

// Runs shoalrun with `args`; see run_command.
run_result run_shoalrun(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {},
                        const output_hook& hook = {}, const child_hook& in_child = {}) {
  std::vector<std::string> command = {kShoalrun};
  command.insert(command.end(), args.begin(), args.end());
  return run_command(command, extra_env, hook, in_child);
}

std::string rank_prefix(int rank) { return fmt::format("[{}] ", rank); }

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "[r] KEY=VALUE" lines of `probe env`, per rank.
std::map<int, std::map<std::string, std::string>> parse_env(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> env;
  static const std::regex kLine(R"(\[(\d+)\] ([A-Z_]+)=(.*))");
  for (const std::string& line : split_lines(out)) {
    std::smatch m;
    if (std::regex_match(line, m, kLine)) env[std::stoi(m[1])][m[2]] = m[3];
  }
  return env;
}

// pids printed by `probe sleep` ("[r] pid=N").
std::vector<pid_t> probe_pids(const std::string& out) {
  std::vector<pid_t> pids;
  static const std::regex kLine(R"(\[\d+\] pid=(\d+))");
  for (const std::string& line : split_lines(out)) {
    std::smatch m;
    if (std::regex_match(line, m, kLine)) pids.push_back(static_cast<pid_t>(std::stol(m[1])));
  }
  return pids;
}

// shoalrun reaps its children, so once it has exited a rank it stopped no longer exists at all.
void expect_all_gone(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) EXPECT_TRUE(::kill(pid, 0) != 0 && errno == ESRCH) << "rank process " << pid << " survived";
}

class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "shoal_launcher_XXXXXX").string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::size_t entries() const { return static_cast<std::size_t>(std::distance(fs::directory_iterator(path_), {})); }

 private:
  fs::path path_;
};

std::string describe(const run_result& r) {
  return "exit " + std::to_string(r.exit_code) + ", signal " + std::to_string(r.term_signal) +
         (r.hung ? ", HUNG" : "") + "\n--- stdout\n" + r.out.substr(0, 4000) + "\n--- stderr\n" + r.err.substr(0, 4000);
}

// --- environment -------------------------------------------------------------------------------

class rank_env : public ::testing::TestWithParam<int> {};

TEST_P(rank_env, every_rank_gets_its_identity_and_the_job_rendezvous) {
  const int n = GetParam();
  run_result r = run_shoalrun({"-n", std::to_string(n), "--", kProbe, "env"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto env = parse_env(r.out);
  ASSERT_EQ(env.size(), static_cast<std::size_t>(n)) << describe(r);
  const std::string addr = env[0]["SHOAL_BOOTSTRAP_ADDR"];
  const std::string secret = env[0]["SHOAL_BOOTSTRAP_SECRET"];
  EXPECT_TRUE(std::regex_match(addr, std::regex(R"(127\.0\.0\.1:[1-9]\d*)"))) << addr;
  EXPECT_TRUE(std::regex_match(secret, std::regex("[0-9a-f]{32}"))) << secret;
  for (int rank = 0; rank < n; ++rank) {
    auto& vars = env[rank];
    EXPECT_EQ(vars["SHOAL_RANK"], std::to_string(rank));
    EXPECT_EQ(vars["SHOAL_WORLD_SIZE"], std::to_string(n));
    EXPECT_EQ(vars["SHOAL_LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(vars["SHOAL_LOCAL_SIZE"], std::to_string(n));
    EXPECT_EQ(vars["SHOAL_BOOTSTRAP_ADDR"], addr);
    EXPECT_EQ(vars["SHOAL_BOOTSTRAP_SECRET"], secret);
    EXPECT_EQ(vars.count("SHOAL_BOOTSTRAP_LISTEN_FD"), rank == 0 ? 1u : 0u) << "rank " << rank;
    EXPECT_EQ(vars["NCCL_NVLS_ENABLE"], "0");
    EXPECT_EQ(vars["NVSHMEM_DISABLE_NVLS"], "1");
    EXPECT_EQ(vars["TORCH_SYMM_MEM_DISABLE_MULTICAST"], "1");
  }
}

INSTANTIATE_TEST_SUITE_P(pe_counts, rank_env, ::testing::Values(1, 2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) { return fmt::format("n{}", info.param); });

TEST(env, inherited_otherwise_but_launcher_variables_are_forced) {
  run_result r = run_shoalrun({"-n", "2", "--", kProbe, "env"},
                              {"SHOAL_TEST_MARKER=kept", "SHOAL_RANK=77", "SHOAL_BOOTSTRAP_LISTEN_FD=987654",
                               "NCCL_NVLS_ENABLE=1", "NVSHMEM_DISABLE_NVLS=0"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto env = parse_env(r.out);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(env[rank]["SHOAL_TEST_MARKER"], "kept");
    EXPECT_EQ(env[rank]["SHOAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env[rank]["NCCL_NVLS_ENABLE"], "0");
    EXPECT_EQ(env[rank]["NVSHMEM_DISABLE_NVLS"], "1");
  }
  EXPECT_NE(env[0]["SHOAL_BOOTSTRAP_LISTEN_FD"], "987654");
  EXPECT_EQ(env[1].count("SHOAL_BOOTSTRAP_LISTEN_FD"), 0u);
}

TEST(env, secret_is_fresh_per_job) {
  run_result a = run_shoalrun({"-n", "1", "--", kProbe, "env"});
  run_result b = run_shoalrun({"-n", "1", "--", kProbe, "env"});
  ASSERT_EQ(a.exit_code, 0) << describe(a);
  ASSERT_EQ(b.exit_code, 0) << describe(b);
  std::string sa = parse_env(a.out)[0]["SHOAL_BOOTSTRAP_SECRET"];
  std::string sb = parse_env(b.out)[0]["SHOAL_BOOTSTRAP_SECRET"];
  EXPECT_TRUE(std::regex_match(sa, std::regex("[0-9a-f]{32}"))) << sa;
  EXPECT_TRUE(std::regex_match(sb, std::regex("[0-9a-f]{32}"))) << sb;
  EXPECT_NE(sa, sb);
}

TEST(env, program_is_found_through_path) {
  const std::string dir = fs::path(kProbe).parent_path().string();
  const char* path = std::getenv("PATH");
  run_result r = run_shoalrun({"-n", "2", fs::path(kProbe).filename().string(), "env"},
                              {"PATH=" + dir + ":" + (path != nullptr ? path : "/usr/bin:/bin")});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(parse_env(r.out).size(), 2u) << describe(r);
}

TEST(sockets, only_rank0_holds_the_listening_socket_and_the_others_can_connect) {
  run_result r = run_shoalrun({"-n", "4", "--timeout", "15", "--", kProbe, "sockets"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("[0] accepted 3\n"), std::string::npos) << describe(r);
}

// --- output ----------------------------------------------------------------------------------------

TEST(output, lines_are_prefixed_with_the_rank_per_stream) {
  run_result r = run_shoalrun({"-n", "2", "--", kProbe, "lines"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string p = rank_prefix(rank);
    std::vector<std::string> mine;
    for (const std::string& line : split_lines(r.out))
      if (line.starts_with(p)) mine.push_back(line);
    EXPECT_EQ(mine, (std::vector<std::string>{p + "out-a", p + "out-b", p + "out-tail"})) << describe(r);
    EXPECT_NE(r.err.find(p + "err-a\n"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find(p + "err-tail\n"), std::string::npos) << describe(r);
  }
  EXPECT_EQ(split_lines(r.out).size(), 6u) << describe(r);
  EXPECT_EQ(r.out.find("err-"), std::string::npos) << describe(r);
}

TEST(output, long_lines_of_different_ranks_never_interleave) {
  constexpr int kRanks = 4, kLines = 150, kLength = 6000;  // longer than PIPE_BUF, written in two pieces
  run_result r = run_shoalrun(
      {"-n", std::to_string(kRanks), "--", kProbe, "flood", std::to_string(kLines), std::to_string(kLength)});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::map<int, int> count;
  for (const std::string& line : split_lines(r.out)) {
    ASSERT_GE(line.size(), 4u);
    int rank = line[1] - '0';
    ASSERT_TRUE(rank >= 0 && rank < kRanks && line.starts_with(rank_prefix(rank))) << line.substr(0, 80);
    ASSERT_EQ(line.substr(4), std::string(kLength, static_cast<char>('a' + rank))) << "mixed line from rank " << rank;
    ++count[rank];
  }
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(count[rank], kLines) << "rank " << rank;
}

TEST(output, a_reader_that_leaves_early_costs_output_but_not_the_job) {
  // `shoalrun ... | head -n 1`. Each rank writes far more than the pipes on its way hold, so it is still
  // writing when head has gone; it creates its marker file only after its last line.
  constexpr int kRanks = 2;
  temp_dir dir;
  const std::string status_file = dir.str() + "/shoalrun.status";
  run_result r =
      run_command({"/bin/sh", "-c", R"(out=$1; shift; { "$@"; echo $? > "$out"; } | head -n 1)", "sh", status_file,
                   kShoalrun, "-n", std::to_string(kRanks), "--", kProbe, "chatter", "20000", dir.str()});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(split_lines(r.out).size(), 1u) << describe(r);
  std::string status;
  std::ifstream(status_file) >> status;
  EXPECT_EQ(status, "0") << "shoalrun's exit status\n" << describe(r);
  for (int rank = 0; rank < kRanks; ++rank)
    EXPECT_TRUE(fs::exists(dir.str() + "/done." + std::to_string(rank))) << "rank " << rank << " did not finish";
}

// --- input -------------------------------------------------------------------------------------

TEST(input, piped_stdin_reaches_rank0_alone_and_ends_there) {
  int in[2];
  ASSERT_EQ(::pipe2(in, O_CLOEXEC), 0);
  constexpr std::string_view kText = "first\nsecond\n";
  ASSERT_EQ(::write(in[1], kText.data(), kText.size()), static_cast<ssize_t>(kText.size()));
  ASSERT_EQ(::close(in[1]), 0);
  // `cat` ends only at the end of its input, so "end" shows that it arrived.
  run_result r = run_shoalrun({"-n", "2", "--", "/bin/sh", "-c", "cat; echo end"}, {}, {}, [&] {
    if (::dup2(in[0], STDIN_FILENO) < 0) ::_exit(126);
  });
  ::close(in[0]);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::vector<std::string> lines = split_lines(r.out);
  std::vector<std::string> rank0, rank1;
  for (const std::string& line : lines) (line.starts_with(rank_prefix(0)) ? rank0 : rank1).push_back(line);
  EXPECT_EQ(rank0, (std::vector<std::string>{"[0] first", "[0] second", "[0] end"})) << describe(r);
  EXPECT_EQ(rank1, (std::vector<std::string>{"[1] end"})) << describe(r);
}

TEST(input, a_line_typed_on_the_terminal_reaches_rank0) {
  // shoalrun leads a session whose controlling terminal is a pseudo-terminal, and is its foreground
  // process group, as when started from an interactive shell. The ranks run in groups of their own, so a
  // rank that read the terminal itself would be stopped (SIGTTIN) and the job would hang.
  int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0) << std::strerror(errno);
  ASSERT_EQ(::grantpt(master), 0) << std::strerror(errno);
  ASSERT_EQ(::unlockpt(master), 0) << std::strerror(errno);
  const char* name = ::ptsname(master);
  ASSERT_NE(name, nullptr) << std::strerror(errno);
  const std::string terminal = name;
  auto on_terminal = [&] {
    if (::setsid() < 0) ::_exit(126);
    int fd = ::open(terminal.c_str(), O_RDWR);
    if (fd < 0 || ::ioctl(fd, TIOCSCTTY, 0) != 0 || ::dup2(fd, STDIN_FILENO) < 0) ::_exit(126);
  };
  // Rank 1 reads an empty stdin and answers at once; that says the job is up, so the line is typed then.
  bool typed = false;
  auto type_when_up = [&](pid_t, const std::string& out, const std::string&) {
    if (typed || out.find("[1] got:\n") == std::string::npos) return;
    constexpr std::string_view kLine = "hello\n";
    typed = ::write(master, kLine.data(), kLine.size()) == static_cast<ssize_t>(kLine.size());
  };
  run_result r = run_shoalrun({"-n", "2", "--", "/bin/sh", "-c", "read x; echo got:$x"}, {}, type_when_up, on_terminal);
  ::close(master);
  ASSERT_TRUE(typed) << describe(r);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("[0] got:hello\n"), std::string::npos) << describe(r);
}

// --- usage errors ------------------------------------------------------------------------------

struct usage_case {
  std::string name;
  std::vector<std::string> args;  // "PROBE" stands for the probe, "DIR" for a fresh directory
  std::string message;            // expected in stderr
};

class usage : public ::testing::TestWithParam<usage_case> {};

TEST_P(usage, is_rejected_with_exit_2_before_anything_starts) {
  temp_dir dir;
  std::vector<std::string> args;
  for (const std::string& a : GetParam().args) args.push_back(a == "PROBE" ? kProbe : a == "DIR" ? dir.str() : a);
  run_result r = run_shoalrun(args);
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(dir.entries(), 0u) << "a rank was started";
}

INSTANTIATE_TEST_SUITE_P(
    cases, usage,
    ::testing::Values(
        usage_case{"n_zero", {"-n", "0", "--", "PROBE", "touch", "DIR"}, "not in range"},
        usage_case{"n_negative", {"-n", "-3", "--", "PROBE", "touch", "DIR"}, "not in range"},
        usage_case{"n_garbage", {"-n", "two", "--", "PROBE", "touch", "DIR"}, "--np"},
        usage_case{"n_missing", {"--", "PROBE", "touch", "DIR"}, "required"},
        usage_case{"no_program", {"-n", "2"}, "no program given"},
        usage_case{"no_program_after_separator", {"-n", "2", "--"}, "no program given"},
        usage_case{"program_not_in_path", {"-n", "2", "shoal_no_such_program_anywhere"}, "not found"},
        usage_case{"program_path_missing", {"-n", "2", "--", "/nonexistent/shoal_probe"}, "not an executable file"},
        usage_case{"program_is_a_directory", {"-n", "2", "--", "DIR"}, "not an executable file"},
        usage_case{"timeout_garbage", {"-n", "2", "--timeout", "soon", "--", "PROBE", "touch", "DIR"}, "--timeout"},
        usage_case{"timeout_negative", {"-n", "2", "--timeout", "-1", "--", "PROBE", "touch", "DIR"}, "--timeout"},
        usage_case{"unknown_option", {"-n", "2", "--frobnicate", "--", "PROBE", "touch", "DIR"}, "unknown option"}),
    [](const ::testing::TestParamInfo<usage_case>& info) { return info.param.name; });

TEST(usage_help, documents_the_exit_codes) {
  run_result r = run_shoalrun({"--help"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("124"), std::string::npos);
  EXPECT_NE(r.out.find("128+N"), std::string::npos);
}

TEST(usage_help, non_executable_file_is_a_usage_error) {
  temp_dir dir;
  const std::string file = dir.str() + "/not_executable";
  { std::ofstream(file) << "#!/bin/sh\nexit 0\n"; }
  ::chmod(file.c_str(), 0644);
  run_result r = run_shoalrun({"-n", "1", "--", file});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("not_executable"), std::string::npos) << describe(r);
}

// --- failures, timeout, signals ----------------------------------------------------------------

TEST(failure, nonzero_exit_stops_the_others_and_is_named) {
  // The others ignore SIGTERM, so only the SIGKILL after the grace period stops them.
  temp_dir dir;
  run_result r = run_shoalrun({"-n", "4", "--", kProbe, "fail", "2", "exit:3", dir.str(), "ignore-term"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_NE(r.err.find("shoalrun: rank 2 exited with status 3"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("ranks 0, 1, 3 still running after"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("sending SIGKILL"), std::string::npos) << describe(r);
  EXPECT_EQ(probe_pids(r.out).size(), 3u) << describe(r);
  expect_all_gone(probe_pids(r.out));
}

TEST(failure, killed_rank_is_named_with_its_signal) {
  temp_dir dir;
  run_result r = run_shoalrun({"-n", "3", "--", kProbe, "fail", "1", "signal:9", dir.str()});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << describe(r);
  EXPECT_NE(r.err.find("shoalrun: rank 1 was killed by signal 9 (Killed)"), std::string::npos) << describe(r);
  EXPECT_EQ(r.err.find("sending SIGKILL"), std::string::npos) << "SIGTERM alone stops these ranks\n" << describe(r);
  EXPECT_EQ(probe_pids(r.out).size(), 2u) << describe(r);
  expect_all_gone(probe_pids(r.out));
}

TEST(failure, all_ranks_exiting_zero_is_success_even_with_a_timeout) {
  run_result r = run_shoalrun({"-n", "2", "--timeout", "30", "--", kProbe, "env"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "") << describe(r);
}

TEST(timeout, expiry_stops_all_names_the_running_ranks_and_exits_124) {
  // Rank 1 finishes (status 0) once the others are up; ranks 0 and 2 sleep until the timeout.
  temp_dir dir;
  run_result r = run_shoalrun({"-n", "3", "--timeout", "1.5", "--", kProbe, "fail", "1", "exit:0", dir.str()});
  EXPECT_EQ(r.exit_code, 124) << describe(r);
  EXPECT_NE(r.err.find("ranks still running: 0, 2"), std::string::npos) << describe(r);
  expect_all_gone(probe_pids(r.out));
}

TEST(timeout, accepts_a_duration_with_unit) {
  temp_dir dir;
  run_result r = run_shoalrun({"-n", "2", "--timeout", "300ms", "--", kProbe, "sleep", dir.str(), "ignore-term"});
  EXPECT_EQ(r.exit_code, 124) << describe(r);
  EXPECT_NE(r.err.find("timeout"), std::string::npos) << describe(r);
  expect_all_gone(probe_pids(r.out));
}

class forwarded_signal : public ::testing::TestWithParam<int> {};

TEST_P(forwarded_signal, reaches_every_rank_and_shoalrun_ends) {
  const int signo = GetParam();
  constexpr int kRanks = 3;
  temp_dir dir;
  bool sent = false;
  auto send_when_ready = [&](pid_t shoalrun, const std::string& out, const std::string&) {
    std::size_t ready = 0;
    for (std::size_t at = out.find("] ready\n"); at != std::string::npos; at = out.find("] ready\n", at + 1)) ++ready;
    if (!sent && ready == kRanks) {
      ::kill(shoalrun, signo);
      sent = true;
    }
  };
  // With report-term the ranks exit 0 on SIGTERM after saying so; SIGINT kills them (default action).
  run_result r = run_shoalrun({"-n", std::to_string(kRanks), "--", kProbe, "sleep", dir.str(), "report-term"}, {},
                              send_when_ready);
  ASSERT_TRUE(sent) << describe(r);
  EXPECT_EQ(r.exit_code, 128 + signo) << describe(r);
  EXPECT_NE(r.err.find(fmt::format("received signal {}", signo)), std::string::npos) << describe(r);
  if (signo == SIGTERM) {
    for (int rank = 0; rank < kRanks; ++rank)
      EXPECT_NE(r.out.find(rank_prefix(rank) + "got SIGTERM\n"), std::string::npos) << describe(r);
  }
  expect_all_gone(probe_pids(r.out));
}

// The state letter of /proc/<pid>/stat ('T' when stopped by a signal, 'Z' or 'X' once ended), or '?'.
char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  std::size_t name_end = line.rfind(')');  // the state follows the command name in parentheses
  return name_end != std::string::npos && name_end + 2 < line.size() ? line[name_end + 2] : '?';
}

// A process that has ended, whether or not its new parent has reaped it yet.
bool has_ended(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  const char state = process_state(pid);
  return state == 'Z' || state == 'X';
}

// Waits (at most 3 s) until `pid` has ended; kills it if not, so that a failing test leaves nothing behind.
bool ends_soon(pid_t pid) {
  auto give_up = steady::now() + std::chrono::seconds(3);
  while (!has_ended(pid) && steady::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  bool ended = has_ended(pid);
  if (!ended) ::kill(pid, SIGKILL);
  return ended;
}

// Rank 1 starts a helper in its process group (which first runs `helper_prelude`), waits until the helper is
// set up, then runs `rank1_then`; rank 0 runs `rank0`. The job must exit with `exit_code`, and the helper must
// not outlive it: it has had its signals before shoalrun returned (the wait is generous).
void expect_helper_stopped(const std::string& helper_prelude, const std::string& rank1_then, const std::string& rank0,
                           int exit_code) {
  temp_dir dir;
  const std::string pid_file = dir.str() + "/helper.pid";
  const std::string script = "if [ \"$SHOAL_RANK\" = 1 ]; then sh -c '" + helper_prelude +
                             "echo $$ > \"$0\"; exec sleep 777' \"$0\" & "
                             "while [ ! -s \"$0\" ]; do sleep 0.05; done; " +
                             rank1_then + "; fi; " + rank0;
  run_result r = run_shoalrun({"-n", "2", "--", "/bin/sh", "-c", script, pid_file});
  EXPECT_EQ(r.exit_code, exit_code) << describe(r);
  pid_t helper = 0;
  std::ifstream(pid_file) >> helper;
  ASSERT_GT(helper, 0) << describe(r);
  EXPECT_TRUE(ends_soon(helper)) << "the helper " << helper << " outlived the job\n" << describe(r);
}

// What a rank's background helper does before it writes its pid and sleeps: nothing, or ignore SIGTERM.
class helper_of_a_failed_rank : public ::testing::TestWithParam<std::string> {};

// Rank 1 fails once its helper is set up; rank 0 runs until the job is stopped.
TEST_P(helper_of_a_failed_rank, is_stopped_with_the_job) {
  expect_helper_stopped(GetParam(), "exit 3", "exec sleep 600", 3);
}

INSTANTIATE_TEST_SUITE_P(helpers, helper_of_a_failed_rank, ::testing::Values("", "trap \"\" TERM; "),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::string(info.param.empty() ? "plain" : "ignoring_sigterm");
                         });

// Every rank succeeds; what rank 1 left behind gets SIGTERM when the job ends.
TEST(helper_of_a_successful_job, is_stopped_with_the_job) { expect_helper_stopped("", "exit 0", "exit 0", 0); }

// Polls (at most 5 s) until every one of `pids` is in `state` (or, with `negate`, none is).
bool all_reach(const std::vector<pid_t>& pids, char state, bool negate = false) {
  auto give_up = steady::now() + std::chrono::seconds(5);
  for (;;) {
    bool all = std::all_of(pids.begin(), pids.end(), [&](pid_t p) { return (process_state(p) == state) != negate; });
    if (all) return true;
    if (steady::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Ctrl-Z reaches shoalrun's group alone: shoalrun must stop the ranks with itself, and continue them when
// it is continued.
TEST(stop_signal, stops_the_ranks_with_shoalrun_and_continue_resumes_them) {
  constexpr int kRanks = 2;
  temp_dir dir;
  bool tried = false, ranks_stopped = false, shoalrun_stopped = false, ranks_resumed = false;
  auto stop_when_ready = [&](pid_t shoalrun, const std::string& out, const std::string&) {
    std::vector<pid_t> ranks = probe_pids(out);
    if (tried || ranks.size() < kRanks || out.find(rank_prefix(0) + "ready") == std::string::npos ||
        out.find(rank_prefix(1) + "ready") == std::string::npos)
      return;
    tried = true;
    ::kill(shoalrun, SIGTSTP);
    shoalrun_stopped = all_reach({shoalrun}, 'T');
    ranks_stopped = all_reach(ranks, 'T');
    ::kill(shoalrun, SIGCONT);
    ranks_resumed = all_reach(ranks, 'T', /*negate=*/true);
    ::kill(shoalrun, SIGTERM);
  };
  run_result r = run_shoalrun({"-n", std::to_string(kRanks), "--", kProbe, "sleep", dir.str()}, {}, stop_when_ready);
  ASSERT_TRUE(tried) << describe(r);
  EXPECT_TRUE(shoalrun_stopped) << describe(r);
  EXPECT_TRUE(ranks_stopped) << describe(r);
  EXPECT_TRUE(ranks_resumed) << describe(r);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << describe(r);
  expect_all_gone(probe_pids(r.out));
}

INSTANTIATE_TEST_SUITE_P(signals, forwarded_signal, ::testing::Values(SIGTERM, SIGINT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SIGTERM ? "sigterm" : "sigint");
                         });

}  // namespace
