// launcher_probe: the program the launcher tests run under shoalrun. Each mode does one observable
// thing (print its environment, fail, sleep, check its sockets, ...) so a test can check what shoalrun
// did from the exit status and the relayed output alone.
//
//   env                          print the launcher's variables as KEY=VALUE (or KEY unset)
//   lines                        write fixed lines to stdout and stderr, each ending without '\n'
//   flood LINES LEN              write LINES long lines of one letter per rank, each in two pieces
//   touch DIR                    create DIR/ran.<rank>
//   chatter LINES DIR            write LINES lines of 100 bytes to stdout, then create DIR/done.<rank>
//   sleep DIR [ignore-term|report-term]
//                                print pid, mark ready, sleep until killed
//   fail RANK exit:C|signal:S DIR [ignore-term]
//                                rank RANK waits until all others are ready, then exits with C or raises S;
//                                the others behave as `sleep`
//   sockets                      check that rank 0 alone holds the listening socket, then rendezvous
//                                over it (ranks > 0 connect and send their rank)
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

namespace {

constexpr int kExitProbeError = 99;  // the probe itself could not do what its mode asked
constexpr auto kReadyWait = std::chrono::seconds(10);

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : -1;
}

void write_str(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n <= 0) std::_Exit(kExitProbeError);
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

[[noreturn]] void die(const std::string& why) {
  write_str(STDERR_FILENO, "probe error: " + why + "\n");
  std::_Exit(kExitProbeError);
}

void touch(const std::string& path) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) die("cannot create " + path);
  ::close(fd);
}

std::string ready_file(const std::string& dir, int rank) { return dir + "/ready." + std::to_string(rank); }

void on_term(int) {
  static constexpr std::string_view kMessage = "got SIGTERM\n";
  [[maybe_unused]] ssize_t ignored = ::write(STDOUT_FILENO, kMessage.data(), kMessage.size());
  ::_exit(0);
}

[[noreturn]] void sleep_forever(const std::string& dir, std::string_view how) {
  if (how == "ignore-term") ::signal(SIGTERM, SIG_IGN);
  if (how == "report-term") ::signal(SIGTERM, on_term);
  write_str(STDOUT_FILENO, "pid=" + std::to_string(::getpid()) + "\n");
  touch(ready_file(dir, env_int("SHOAL_RANK")));
  write_str(STDOUT_FILENO, "ready\n");
  while (true) ::pause();
}

int mode_env() {
  static constexpr const char* kNames[] = {"SHOAL_RANK",
                                           "SHOAL_WORLD_SIZE",
                                           "SHOAL_LOCAL_RANK",
                                           "SHOAL_LOCAL_SIZE",
                                           "SHOAL_BOOTSTRAP_ADDR",
                                           "SHOAL_BOOTSTRAP_SECRET",
                                           "SHOAL_BOOTSTRAP_LISTEN_FD",
                                           "NCCL_NVLS_ENABLE",
                                           "NVSHMEM_DISABLE_NVLS",
                                           "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                           "SHOAL_TEST_MARKER"};
  std::string out;
  for (const char* name : kNames) {
    const char* value = std::getenv(name);
    out += value != nullptr ? std::string(name) + "=" + value + "\n" : std::string(name) + " unset\n";
  }
  write_str(STDOUT_FILENO, out);
  return 0;
}

int mode_lines() {
  write_str(STDOUT_FILENO, "out-a\nout-");
  write_str(STDERR_FILENO, "err-a\n");
  write_str(STDOUT_FILENO, "b\n");
  write_str(STDERR_FILENO, "err-tail");
  write_str(STDOUT_FILENO, "out-tail");
  return 0;
}

int mode_flood(int lines, int length) {
  int rank = env_int("SHOAL_RANK");
  std::string line(static_cast<std::size_t>(length), static_cast<char>('a' + rank % 26));
  line.push_back('\n');
  for (int i = 0; i < lines; ++i) {
    std::size_t cut = static_cast<std::size_t>(1 + (i * 7919) % length);
    write_str(STDOUT_FILENO, std::string_view(line).substr(0, cut));
    write_str(STDOUT_FILENO, std::string_view(line).substr(cut));
  }
  return 0;
}

int mode_chatter(int lines, const std::string& dir) {
  std::string line(99, static_cast<char>('a' + env_int("SHOAL_RANK") % 26));
  line.push_back('\n');
  for (int i = 0; i < lines; ++i) write_str(STDOUT_FILENO, line);
  touch(dir + "/done." + std::to_string(env_int("SHOAL_RANK")));
  return 0;
}

int mode_fail(int failing_rank, std::string_view action, const std::string& dir, std::string_view how) {
  int rank = env_int("SHOAL_RANK");
  int size = env_int("SHOAL_WORLD_SIZE");
  if (rank != failing_rank) sleep_forever(dir, how);
  // Fail only once every other rank is ready, so that stopping them is what the test observes.
  auto give_up = std::chrono::steady_clock::now() + kReadyWait;
  for (int r = 0; r < size; ++r) {
    while (r != rank && ::access(ready_file(dir, r).c_str(), F_OK) != 0) {
      if (std::chrono::steady_clock::now() > give_up) die("rank " + std::to_string(r) + " never became ready");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (action.starts_with("exit:")) return std::atoi(action.data() + 5);
  if (action.starts_with("signal:")) {
    ::signal(std::atoi(action.data() + 7), SIG_DFL);
    ::raise(std::atoi(action.data() + 7));
  }
  die("bad action " + std::string(action));
}

bool is_listening_socket(int fd) {
  int listening = 0;
  socklen_t len = sizeof listening;
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening != 0;
}

int count_listening_sockets() {
  int count = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) die("cannot list /proc/self/fd");
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    int fd = std::atoi(entry->d_name);
    if (fd != ::dirfd(dir) && is_listening_socket(fd)) ++count;
  }
  ::closedir(dir);
  return count;
}

int mode_sockets() {
  int rank = env_int("SHOAL_RANK");
  int size = env_int("SHOAL_WORLD_SIZE");
  std::string addr = std::getenv("SHOAL_BOOTSTRAP_ADDR") ? std::getenv("SHOAL_BOOTSTRAP_ADDR") : "";
  if (!addr.starts_with("127.0.0.1:")) die("bad SHOAL_BOOTSTRAP_ADDR '" + addr + "'");
  int port = std::atoi(addr.c_str() + 10);
  const char* fd_text = std::getenv("SHOAL_BOOTSTRAP_LISTEN_FD");

  if (rank != 0) {
    if (fd_text != nullptr) die("SHOAL_BOOTSTRAP_LISTEN_FD is set on rank " + std::to_string(rank));
    if (int n = count_listening_sockets(); n != 0) die("rank " + std::to_string(rank) + " holds listening sockets");
    int sock = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(sock, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("connect failed");
    write_str(sock, std::to_string(rank));
    ::close(sock);
    return 0;
  }

  if (fd_text == nullptr) die("SHOAL_BOOTSTRAP_LISTEN_FD is not set on rank 0");
  int listen_fd = std::atoi(fd_text);
  if (!is_listening_socket(listen_fd)) die("fd " + std::string(fd_text) + " is not a listening socket");
  if (count_listening_sockets() != 1) die("rank 0 holds more than one listening socket");
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) die("getsockname failed");
  if (ntohs(bound.sin_port) != port || bound.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
    die("listening socket is not bound to " + addr);
  int accepted = 0;
  for (int i = 1; i < size; ++i) {
    int conn = ::accept(listen_fd, nullptr, nullptr);
    if (conn < 0) die("accept failed");
    char buf[16] = {};
    if (::read(conn, buf, sizeof buf - 1) <= 0) die("no rank received");
    ::close(conn);
    ++accepted;
  }
  write_str(STDOUT_FILENO, "accepted " + std::to_string(accepted) + "\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view mode = argc > 1 ? argv[1] : "";
  auto arg = [&](int i) -> std::string { return i < argc ? argv[i] : ""; };
  if (mode == "env") return mode_env();
  if (mode == "lines") return mode_lines();
  if (mode == "flood" && argc == 4) return mode_flood(std::atoi(argv[2]), std::atoi(argv[3]));
  if (mode == "touch" && argc == 3) {
    touch(arg(2) + "/ran." + std::to_string(env_int("SHOAL_RANK")));
    return 0;
  }
  if (mode == "chatter" && argc == 4) return mode_chatter(std::atoi(argv[2]), arg(3));
  if (mode == "sleep" && argc >= 3) sleep_forever(arg(2), arg(3));
  if (mode == "fail" && argc >= 5) return mode_fail(std::atoi(argv[2]), arg(3), arg(4), arg(5));
  if (mode == "sockets") return mode_sockets();
  die("unknown mode '" + std::string(mode) + "'");
}
