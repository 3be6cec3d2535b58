#include "spawn.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace shoal_mp {
namespace {

// Variables through which a launcher (or an outer test run) could leak into the hand-made job.
bool is_launcher_variable(std::string_view entry) {
  std::string_view name = entry.substr(0, entry.find('='));
  for (std::string_view prefix : {"SHOAL_", "SLURM_", "OMPI_", "PMIX_"})
    if (name.starts_with(prefix)) return true;
  for (std::string_view exact :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"})
    if (name == exact) return true;
  return false;
}

}  // namespace

bool process_end::exited() const { return !killed_by_driver && WIFEXITED(wait_status); }
int process_end::exit_code() const { return exited() ? WEXITSTATUS(wait_status) : -1; }
bool process_end::killed_by(int signal) const { return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == signal; }

process_group::~process_group() {
  for (child& c : children_) {
    if (!c.ended) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
    }
    if (c.out_fd >= 0) ::close(c.out_fd);
  }
}

int process_group::start(const process_spec& spec) {
  // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e)
    if (!is_launcher_variable(*e)) env_text.emplace_back(*e);
  for (const auto& [name, value] : spec.env) env_text.push_back(name + "=" + value);
  std::vector<char*> envp, argv;
  for (auto& s : env_text) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  children_.push_back({pid, pipe_fds[0], false, {}});
  return static_cast<int>(children_.size()) - 1;
}

std::vector<process_end> process_group::wait(double max_seconds, const std::vector<int>& expendable) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_seconds);
  bool expendables_killed = false;
  for (;;) {
    std::vector<pollfd> fds;
    for (child& c : children_)
      if (c.out_fd >= 0) fds.push_back({c.out_fd, POLLIN, 0});
    if (!fds.empty()) ::poll(fds.data(), fds.size(), 20);
    for (child& c : children_) {
      if (c.out_fd < 0) continue;
      char buf[4096];
      for (;;) {
        ssize_t n = ::read(c.out_fd, buf, sizeof buf);
        if (n > 0) {
          c.end.output.append(buf, static_cast<std::size_t>(n));
          continue;
        }
        if (n == 0) {
          ::close(c.out_fd);
          c.out_fd = -1;
        }
        break;
      }
    }
    bool all_ended = true, all_essential_ended = true;
    for (std::size_t i = 0; i < children_.size(); ++i) {
      child& c = children_[i];
      if (!c.ended && ::waitpid(c.pid, &c.end.wait_status, WNOHANG) == c.pid) c.ended = true;
      bool done = c.ended && c.out_fd < 0;
      all_ended &= done;
      if (std::find(expendable.begin(), expendable.end(), static_cast<int>(i)) == expendable.end())
        all_essential_ended &= done;
    }
    if (all_ended) break;
    if (all_essential_ended && !expendables_killed) {
      for (int i : expendable)
        if (!children_[static_cast<std::size_t>(i)].ended) ::kill(children_[static_cast<std::size_t>(i)].pid, SIGKILL);
      expendables_killed = true;
    }
    if (std::chrono::steady_clock::now() > until) {
      for (child& c : children_) {
        if (c.ended) continue;
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, &c.end.wait_status, 0);
        c.ended = true;
        c.end.killed_by_driver = true;
      }
      for (child& c : children_)
        if (c.out_fd >= 0) {
          ::close(c.out_fd);
          c.out_fd = -1;
        }
      break;
    }
  }
  std::vector<process_end> ends;
  for (child& c : children_) ends.push_back(c.end);
  return ends;
}

int free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("no free port");
  ::close(s);
  return ntohs(addr.sin_port);
}

}  // namespace shoal_mp
