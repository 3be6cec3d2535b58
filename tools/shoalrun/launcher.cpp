#include "launcher.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>

#include "output_relay.hpp"
#include "shoal/error.hpp"

extern char** environ;

namespace shoal::launcher {
namespace {

using steady = std::chrono::steady_clock;

// Between the polite signal (SIGTERM, or the one forwarded) and SIGKILL: long enough for a rank to
// flush and exit, short enough that the whole job is gone within 5 s.
constexpr auto kStopGrace = std::chrono::seconds(2);
constexpr int kListenBacklog = 1024;
constexpr int kSecretBytes = 16;      // printed as 32 lowercase hex digits
constexpr int kExitExecFailed = 127;  // a child whose execve failed, as a shell reports it
constexpr std::size_t kReadChunk = 64 * 1024;
// How soon input typed on the terminal starts reaching rank 0 after a backgrounded shoalrun is brought
// back to the foreground.
constexpr auto kForegroundRecheck = std::chrono::milliseconds(250);

// Variables shoalrun sets in every child. Inherited values of them are dropped first, so a shoalrun
// started from inside a rank never leaks that rank's identity or listen fd to its own children.
constexpr std::array<std::string_view, 10> kOwnedVariables = {"SHOAL_RANK",
                                                              "SHOAL_WORLD_SIZE",
                                                              "SHOAL_LOCAL_RANK",
                                                              "SHOAL_LOCAL_SIZE",
                                                              "SHOAL_BOOTSTRAP_ADDR",
                                                              "SHOAL_BOOTSTRAP_SECRET",
                                                              "SHOAL_BOOTSTRAP_LISTEN_FD",
                                                              "NCCL_NVLS_ENABLE",
                                                              "NVSHMEM_DISABLE_NVLS",
                                                              "TORCH_SYMM_MEM_DISABLE_MULTICAST"};

// NVLink multicast must never be used on the shared machines (see DESIGN.md, Safety): forced on.
constexpr std::array<std::string_view, 3> kMulticastOff = {"NCCL_NVLS_ENABLE=0", "NVSHMEM_DISABLE_NVLS=1",
                                                           "TORCH_SYMM_MEM_DISABLE_MULTICAST=1"};

[[noreturn]] void throw_errno(std::string_view call) { throw shoal::error(errc::system, call, std::strerror(errno)); }

void note(std::string_view line) { write_all(STDERR_FILENO, fmt::format("shoalrun: {}\n", line)); }

class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~unique_fd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Takes a descriptor just returned by `call` (close-on-exec already) and moves it above 0..2, so that a
// child's dup2 onto its standard streams can never collide with it, even when shoalrun itself was
// started with a standard stream closed.
unique_fd own_fd(int fd, std::string_view call) {
  if (fd < 0) throw_errno(call);
  if (fd > STDERR_FILENO) return unique_fd(fd);
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  int saved = errno;
  ::close(fd);
  errno = saved;
  if (moved < 0) throw_errno("fcntl(F_DUPFD_CLOEXEC)");
  return unique_fd(moved);
}

std::string make_secret() {
  unique_fd random = own_fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC), "open(/dev/urandom)");
  std::array<unsigned char, kSecretBytes> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(random.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_errno("read(/dev/urandom)");
    got += static_cast<std::size_t>(n);
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

struct listener {
  unique_fd fd;
  int port = 0;
};

// The rendezvous socket rank 0 will accept on. Listening before any rank starts means the others can
// connect at once (the backlog holds them) and no port can be taken between choosing and binding it.
listener open_listener() {
  listener l;
  l.fd = own_fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(l.fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw_errno("bind(127.0.0.1:0)");
  if (::listen(l.fd.get(), kListenBacklog) != 0) throw_errno("listen");
  socklen_t len = sizeof addr;
  if (::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) throw_errno("getsockname");
  l.port = ntohs(addr.sin_port);
  return l;
}

bool is_owned_variable(std::string_view entry) {
  std::string_view name = entry.substr(0, entry.find('='));
  return std::find(kOwnedVariables.begin(), kOwnedVariables.end(), name) != kOwnedVariables.end();
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// `end`: what waitid reported for a rank that has ended.
bool ended_well(const siginfo_t& end) { return end.si_code == CLD_EXITED && end.si_status == 0; }

// The code shoalrun exits with when this end is the first failure: the rank's own status, or 128+signal.
int exit_code_of(const siginfo_t& end) {
  return end.si_code == CLD_EXITED ? end.si_status : kExitSignalBase + end.si_status;
}

std::string describe_end(const siginfo_t& end) {
  if (end.si_code == CLD_EXITED) return fmt::format("exited with status {}", end.si_status);
  if (end.si_code == CLD_KILLED || end.si_code == CLD_DUMPED) {
    const char* name = ::strsignal(end.si_status);
    return fmt::format("was killed by signal {} ({})", end.si_status, name != nullptr ? name : "unknown");
  }
  return fmt::format("ended with code {} and status {}", end.si_code, end.si_status);
}

// "0-3, 5, 6, 8-11": compact for large jobs.
std::string format_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (j < i + 2) j = i;  // runs of fewer than three stay a list
    if (!out.empty()) out += ", ";
    out += (j == i) ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

struct child_stream {
  unique_fd fd;  // read end of the pipe; closed at EOF or once the rank has ended
  line_relay relay;
};

struct rank_process {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  child_stream out;
  child_stream err;
};

// A terminal stops a reader outside its foreground process group (SIGTTIN); any other stdin may be read.
bool stdin_readable_now() {
  pid_t foreground = ::tcgetpgrp(STDIN_FILENO);
  return foreground < 0 || foreground == ::getpgrp();
}

// Rank 0's stdin: a pipe that shoalrun fills from its own stdin. Rank 0 runs in a process group of its
// own, so it must not read a terminal itself: the terminal would stop it (SIGTTIN) and the job would
// hang. shoalrun reads a terminal only while its own group is in the foreground, so that a shoalrun
// sent to the background is not stopped either. The pipe closes at the end of shoalrun's stdin; input
// that rank 0 does not take (it closed its stdin or ended) is dropped.
class stdin_relay {
 public:
  // Opens the pipe and returns its read end, which becomes rank 0's stdin.
  unique_fd open();
  // What the relay waits for: input, or room in the pipe for what it read; fd -1 when nothing.
  pollfd wanted() const;
  // True while only the terminal, held by another process group, keeps the relay waiting: no poll event
  // says when shoalrun is in the foreground again, so the poll loop wakes up to look.
  bool waiting_for_foreground() const;
  // After poll reported wanted() ready: moves what it can without blocking.
  void on_ready();
  // Ends the relay: rank 0 has ended or closed its stdin.
  void close();

 private:
  void drain();

  unique_fd to_rank0_;   // the pipe's write end, non-blocking; closed once the relay is over
  std::string pending_;  // read from stdin, not yet in the pipe
  bool input_ended_ = false;
};

unique_fd stdin_relay::open() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2");
  unique_fd read_end = own_fd(fds[0], "pipe2");
  to_rank0_ = own_fd(fds[1], "pipe2");
  if (::fcntl(to_rank0_.get(), F_SETFL, O_NONBLOCK) != 0) throw_errno("fcntl(O_NONBLOCK)");
  return read_end;
}

pollfd stdin_relay::wanted() const {
  if (to_rank0_ && !pending_.empty()) return {.fd = to_rank0_.get(), .events = POLLOUT, .revents = 0};
  if (to_rank0_ && stdin_readable_now()) return {.fd = STDIN_FILENO, .events = POLLIN, .revents = 0};
  return {.fd = -1, .events = 0, .revents = 0};
}

bool stdin_relay::waiting_for_foreground() const { return to_rank0_ && pending_.empty() && !stdin_readable_now(); }

void stdin_relay::on_ready() {
  if (pending_.empty()) {
    // Only after poll said so: shoalrun's stdin is shared with other processes and stays blocking.
    pending_.resize(kReadChunk);
    ssize_t n = ::read(STDIN_FILENO, pending_.data(), pending_.size());
    pending_.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    // An error other than an interruption ends the input as its end does (e.g. EBADF: no stdin at all).
    input_ended_ = n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN);
  }
  drain();
}

void stdin_relay::drain() {
  while (!pending_.empty()) {
    ssize_t n = ::write(to_rank0_.get(), pending_.data(), pending_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // the pipe is full: wait for room
    if (n < 0) return close();             // EPIPE: rank 0 closed its stdin
    pending_.erase(0, static_cast<std::size_t>(n));
  }
  if (input_ended_) to_rank0_.reset();
}

void stdin_relay::close() {
  to_rank0_.reset();
  pending_.clear();
}

// argv and envp of one rank, built before fork so the child calls only async-signal-safe functions.
struct exec_image {
  std::vector<std::string> env;
  std::vector<char*> envp;
  std::vector<char*> argv;
};

enum class stop_reason { none, rank_failed, timeout, signalled, spawn_failed };

class job {
 public:
  job(const job_options& options, std::string program_path)
      : options_(options), program_path_(std::move(program_path)) {}
  ~job();

  int run();

 private:
  void block_signals();
  void ignore_sigpipe();
  void spawn_all();
  void spawn(rank_process& proc, const exec_image& image, int listen_fd, int stdin_fd);
  [[noreturn]] void exec_child(const exec_image& image, int stdin_fd, int out_fd, int err_fd, int listen_fd,
                               pid_t parent) const;
  exec_image make_image(int rank, const std::vector<std::string>& base_env, int listen_fd) const;

  void poll_once();
  void read_stream(child_stream& stream, bool until_eof);
  void on_signals();
  void suspend();
  void collect_ends();
  void on_end(rank_process& proc, const siginfo_t& end);
  void begin_stop(stop_reason reason, int signo);
  void signal_groups(int signo);
  void reap_all();
  std::vector<int> running_ranks() const;
  bool any_running() const;

  const job_options& options_;
  std::string program_path_;
  std::string secret_;
  int port_ = 0;
  std::vector<rank_process> ranks_;
  stdin_relay stdin_;

  sigset_t old_mask_{};
  bool signals_blocked_ = false;
  struct sigaction old_sigpipe_ {};
  bool sigpipe_ignored_ = false;
  unique_fd signal_fd_;

  std::optional<steady::time_point> deadline_;       // of the whole run (--timeout)
  std::optional<steady::time_point> kill_deadline_;  // SIGKILL for ranks still running after a stop began
  stop_reason reason_ = stop_reason::none;
  int reason_code_ = 0;  // the exit code that goes with reason_
};

job::~job() {
  if (signals_blocked_) ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  if (sigpipe_ignored_) ::sigaction(SIGPIPE, &old_sigpipe_, nullptr);
}

// SIGCHLD, SIGINT, SIGTERM, SIGTSTP and SIGCONT are taken through a signalfd in the poll loop, so no
// handler runs concurrently with the loop. Blocked before the first fork; each child restores the old mask.
void job::block_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signo : {SIGCHLD, SIGINT, SIGTERM, SIGTSTP, SIGCONT}) sigaddset(&set, signo);
  if (::sigprocmask(SIG_BLOCK, &set, &old_mask_) != 0) throw_errno("sigprocmask");
  signals_blocked_ = true;
  signal_fd_ = own_fd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK), "signalfd");
}

// A reader of shoalrun's output that goes away early (`shoalrun ... | head`) must cost only the rest of
// the output (see write_all): by default SIGPIPE would kill shoalrun, and with it every rank. Each child
// gets back the disposition shoalrun inherited, since an ignored signal stays ignored across execve.
void job::ignore_sigpipe() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  if (::sigaction(SIGPIPE, &ignore, &old_sigpipe_) != 0) throw_errno("sigaction(SIGPIPE)");
  sigpipe_ignored_ = true;
}

exec_image job::make_image(int rank, const std::vector<std::string>& base_env, int listen_fd) const {
  exec_image image;
  image.env = base_env;
  image.env.push_back(fmt::format("SHOAL_RANK={}", rank));
  image.env.push_back(fmt::format("SHOAL_WORLD_SIZE={}", options_.num_procs));
  image.env.push_back(fmt::format("SHOAL_LOCAL_RANK={}", rank));
  image.env.push_back(fmt::format("SHOAL_LOCAL_SIZE={}", options_.num_procs));
  image.env.push_back(fmt::format("SHOAL_BOOTSTRAP_ADDR=127.0.0.1:{}", port_));
  image.env.push_back(fmt::format("SHOAL_BOOTSTRAP_SECRET={}", secret_));
  if (rank == 0) image.env.push_back(fmt::format("SHOAL_BOOTSTRAP_LISTEN_FD={}", listen_fd));
  for (std::string_view var : kMulticastOff) image.env.emplace_back(var);
  for (std::string& entry : image.env) image.envp.push_back(entry.data());
  image.envp.push_back(nullptr);
  for (const std::string& arg : options_.command) image.argv.push_back(const_cast<char*>(arg.c_str()));
  image.argv.push_back(nullptr);
  return image;
}

void job::exec_child(const exec_image& image, int stdin_fd, int out_fd, int err_fd, int listen_fd, pid_t parent) const {
  // Own process group: a terminal's Ctrl-C reaches shoalrun only, which forwards it, and a stop signal
  // sent to the group also reaches whatever the rank started itself.
  ::setpgid(0, 0);
  // If shoalrun dies without stopping the job (e.g. SIGKILL), the ranks die with it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(kExitExecFailed);
  if (::dup2(stdin_fd, STDIN_FILENO) < 0) ::_exit(kExitExecFailed);
  if (::dup2(out_fd, STDOUT_FILENO) < 0 || ::dup2(err_fd, STDERR_FILENO) < 0) ::_exit(kExitExecFailed);
  // Rank 0 alone keeps the listening socket across exec; every other descriptor of shoalrun is CLOEXEC.
  if (listen_fd >= 0 && ::fcntl(listen_fd, F_SETFD, 0) != 0) ::_exit(kExitExecFailed);
  ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  ::sigaction(SIGPIPE, &old_sigpipe_, nullptr);
  ::execve(program_path_.c_str(), image.argv.data(), image.envp.data());
  // Only async-signal-safe calls here: the errno goes out as digits written by hand.
  int err = errno;
  char message[] = "shoalrun: execve of the program failed with errno 000\n";
  char* digits = message + sizeof message - 5;
  for (int i = 2; i >= 0; --i, err /= 10) digits[i] = static_cast<char>('0' + err % 10);
  [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, message, sizeof message - 1);
  ::_exit(kExitExecFailed);
}

void job::spawn(rank_process& proc, const exec_image& image, int listen_fd, int stdin_fd) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw_errno("pipe2");
  unique_fd out_read = own_fd(out_pipe[0], "pipe2"), out_write = own_fd(out_pipe[1], "pipe2");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw_errno("pipe2");
  unique_fd err_read = own_fd(err_pipe[0], "pipe2"), err_write = own_fd(err_pipe[1], "pipe2");
  for (int fd : {out_read.get(), err_read.get()})
    if (::fcntl(fd, F_SETFL, O_NONBLOCK) != 0) throw_errno("fcntl(O_NONBLOCK)");

  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork");
  if (pid == 0) exec_child(image, stdin_fd, out_write.get(), err_write.get(), listen_fd, parent);
  // Also set from here, so the group exists before any signal to it, whichever process runs first.
  ::setpgid(pid, pid);
  proc.pid = pid;
  proc.running = true;
  proc.out.fd = std::move(out_read);
  proc.err.fd = std::move(err_read);
  if (options_.verbose) note(fmt::format("rank {} started as pid {}", proc.rank, pid));
}

void job::spawn_all() {
  listener l = open_listener();
  port_ = l.port;
  secret_ = make_secret();
  // Only rank 0 reads shoalrun's stdin, through the relay; the others read an empty stream.
  unique_fd null_fd = own_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC), "open(/dev/null)");
  unique_fd rank0_stdin = stdin_.open();

  std::vector<std::string> base_env;
  for (char** entry = environ; *entry != nullptr; ++entry)
    if (!is_owned_variable(*entry)) base_env.emplace_back(*entry);

  if (options_.verbose) note(fmt::format("{} ranks, rendezvous at 127.0.0.1:{}", options_.num_procs, port_));
  ranks_.reserve(static_cast<std::size_t>(options_.num_procs));
  for (int r = 0; r < options_.num_procs; ++r) {
    ranks_.push_back(rank_process{.rank = r,
                                  .out = {.fd = {}, .relay = line_relay(r, STDOUT_FILENO)},
                                  .err = {.fd = {}, .relay = line_relay(r, STDERR_FILENO)}});
    int listen_fd = (r == 0) ? l.fd.get() : -1;
    spawn(ranks_.back(), make_image(r, base_env, listen_fd), listen_fd, r == 0 ? rank0_stdin.get() : null_fd.get());
  }
  // `l` and `rank0_stdin` close here: rank 0 holds the only remaining copies of the listening socket and
  // of its stdin's read end.
}

void job::read_stream(child_stream& stream, bool until_eof) {
  static std::array<char, kReadChunk> buffer;
  while (stream.fd) {
    ssize_t n = ::read(stream.fd.get(), buffer.data(), buffer.size());
    if (n > 0) {
      stream.relay.feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
      if (!until_eof) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !until_eof) return;
    // EOF, an error, or (until_eof) nothing more buffered after the rank ended: a descendant of the
    // rank may still hold the pipe, but the job does not wait for it.
    stream.relay.finish();
    stream.fd.reset();
  }
}

// Signals the process group of every rank started, whether the rank still runs or not: one that ended
// may have left helpers behind in its group. No other process can be hit, because an ended rank stays
// unreaped until the job is over (see collect_ends): its pid, the group's id, cannot be reused until then.
void job::signal_groups(int signo) {
  for (const rank_process& proc : ranks_) {
    if (proc.pid < 0) continue;
    if (::kill(-proc.pid, signo) != 0) ::kill(proc.pid, signo);
  }
}

std::vector<int> job::running_ranks() const {
  std::vector<int> ranks;
  for (const rank_process& proc : ranks_)
    if (proc.running) ranks.push_back(proc.rank);
  return ranks;
}

bool job::any_running() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const rank_process& p) { return p.running; });
}

// The first reason to stop decides shoalrun's exit code; later ones only hurry the stop along.
void job::begin_stop(stop_reason reason, int signo) {
  if (reason_ != stop_reason::none) return;
  reason_ = reason;
  std::vector<int> still = running_ranks();
  if (!still.empty() && reason == stop_reason::rank_failed)
    note(fmt::format("stopping rank{} {}", still.size() == 1 ? "" : "s", format_ranks(still)));
  signal_groups(signo);
  kill_deadline_ = steady::now() + kStopGrace;
}

void job::on_end(rank_process& proc, const siginfo_t& end) {
  proc.running = false;
  if (proc.rank == 0) stdin_.close();
  // Everything the rank wrote before it ended is in the pipes now; relay it before the verdict.
  read_stream(proc.out, true);
  read_stream(proc.err, true);
  if (!ended_well(end) && reason_ == stop_reason::none) {
    note(fmt::format("rank {} {}", proc.rank, describe_end(end)));
    reason_code_ = exit_code_of(end);
    begin_stop(stop_reason::rank_failed, SIGTERM);
  } else if (options_.verbose) {
    note(fmt::format("rank {} {}", proc.rank, describe_end(end)));
  }
}

// Notes the ranks that have ended but leaves them unreaped (WNOWAIT) until reap_all: a zombie keeps its
// pid, and so its process group's id, from being reused while the job may still signal that group.
void job::collect_ends() {
  for (rank_process& proc : ranks_) {
    if (!proc.running) continue;
    siginfo_t end{};
    if (::waitid(P_PID, static_cast<id_t>(proc.pid), &end, WEXITED | WNOHANG | WNOWAIT) != 0) throw_errno("waitid");
    if (end.si_pid == proc.pid) on_end(proc, end);
  }
}

// Once no rank runs and the last signal to their groups has gone out: from here on their pids, and so
// their groups' ids, may be reused.
void job::reap_all() {
  for (rank_process& proc : ranks_) {
    if (proc.pid < 0) continue;
    while (::waitpid(proc.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    proc.pid = -1;
  }
}

void job::on_signals() {
  signalfd_siginfo info{};
  while (::read(signal_fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    int signo = static_cast<int>(info.ssi_signo);
    if (signo == SIGCHLD) continue;
    if (signo == SIGTSTP) {
      suspend();
      continue;
    }
    if (signo == SIGCONT) {  // fg or bg after suspend(), or any other continue: the ranks go on too
      signal_groups(SIGCONT);
      continue;
    }
    if (reason_ == stop_reason::none) {
      note(fmt::format("received signal {} ({}); forwarding it to the ranks", signo, ::strsignal(signo)));
      reason_code_ = kExitSignalBase + signo;
      begin_stop(stop_reason::signalled, signo);
    } else {
      // A second request while stopping: do not wait out the grace period.
      note(fmt::format("received signal {} while stopping; killing the ranks", signo));
      signal_groups(SIGKILL);
    }
  }
  collect_ends();
}

// A terminal's Ctrl-Z stops the foreground group, shoalrun's, which the ranks are not in (see exec_child):
// shoalrun passes the stop on to their groups, then stops itself so that the shell takes the terminal back.
// The shell's fg or bg continues shoalrun alone, and on_signals passes that on too. Deadlines keep running
// while the job is stopped: --timeout, and the ranks' own (SHOAL_BOOTSTRAP_TIMEOUT), may expire on resuming.
void job::suspend() {
  signal_groups(SIGTSTP);
  ::raise(SIGSTOP);
}

void job::poll_once() {
  std::vector<pollfd> fds;
  std::vector<child_stream*> streams;
  fds.push_back({.fd = signal_fd_.get(), .events = POLLIN, .revents = 0});
  fds.push_back(stdin_.wanted());  // poll skips it when its fd is -1
  constexpr std::size_t kFirstStream = 2;
  for (rank_process& proc : ranks_) {
    for (child_stream* s : {&proc.out, &proc.err}) {
      if (!s->fd) continue;
      fds.push_back({.fd = s->fd.get(), .events = POLLIN, .revents = 0});
      streams.push_back(s);
    }
  }

  std::optional<steady::time_point> wake = reason_ == stop_reason::none ? deadline_ : kill_deadline_;
  int timeout_ms = -1;
  if (wake) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*wake - steady::now()).count();
    timeout_ms = static_cast<int>(std::clamp<decltype(left)>(left, 0, 60'000));
  }
  if (stdin_.waiting_for_foreground()) {
    auto recheck = static_cast<int>(kForegroundRecheck.count());
    timeout_ms = timeout_ms < 0 ? recheck : std::min(timeout_ms, recheck);
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) throw_errno("poll");

  for (std::size_t i = kFirstStream; i < fds.size(); ++i)
    if (fds[i].revents != 0) read_stream(*streams[i - kFirstStream], false);
  if (fds[1].revents != 0) stdin_.on_ready();
  if (fds[0].revents != 0) on_signals();

  steady::time_point now = steady::now();
  if (reason_ == stop_reason::none && deadline_ && now >= *deadline_) {
    note(fmt::format("timeout after {} s; ranks still running: {}", *options_.timeout_seconds,
                     format_ranks(running_ranks())));
    reason_code_ = kExitTimeout;
    begin_stop(stop_reason::timeout, SIGTERM);
  } else if (reason_ != stop_reason::none && kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    std::vector<int> still = running_ranks();
    if (!still.empty()) {
      note(fmt::format("rank{} {} still running after {} s; sending SIGKILL", still.size() == 1 ? "" : "s",
                       format_ranks(still), std::chrono::seconds(kStopGrace).count()));
      signal_groups(SIGKILL);
    }
  }
}

int job::run() {
  block_signals();
  ignore_sigpipe();
  if (options_.timeout_seconds)
    deadline_ = steady::now() +
                std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(*options_.timeout_seconds));
  try {
    spawn_all();
  } catch (const shoal::error& e) {
    note(fmt::format("could not start the job: {}", e.what()));
    reason_code_ = kExitInternal;
    begin_stop(stop_reason::spawn_failed, SIGKILL);
  }
  while (any_running()) poll_once();
  // The job ends with its ranks: what they left in their groups is killed before shoalrun returns, at once
  // when the job was stopped, and politely (SIGTERM, not waited for) after a job that succeeded.
  signal_groups(reason_ != stop_reason::none ? SIGKILL : SIGTERM);
  reap_all();
  return reason_ == stop_reason::none ? 0 : reason_code_;
}

}  // namespace

std::string resolve_program(const std::string& program) {
  if (program.empty()) throw usage_error("the program name is empty");
  if (program.find('/') != std::string::npos) {
    if (!is_executable_file(program)) throw usage_error(fmt::format("'{}' is not an executable file", program));
    return program;
  }
  const char* path_env = std::getenv("PATH");
  std::string_view path = (path_env != nullptr && *path_env != '\0') ? path_env : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    std::size_t colon = path.find(':');
    std::string_view dir = path.substr(0, colon);
    // An empty PATH entry means the current directory, as for execvp.
    std::string candidate = dir.empty() ? program : fmt::format("{}/{}", dir, program);
    if (is_executable_file(candidate)) return dir.empty() ? "./" + program : candidate;
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  throw usage_error(fmt::format("program '{}' not found in PATH (or not executable)", program));
}

int run_job(const job_options& options) {
  if (options.command.empty()) throw usage_error("no program given");
  job j(options, resolve_program(options.command.front()));
  return j.run();
}

}  // namespace shoal::launcher
