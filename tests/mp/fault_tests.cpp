// Fault scenarios of the bootstrap: each test starts a job of shoal_mp_tests processes (by hand, or
// under shoalrun) in which one PE misbehaves, and checks that every survivor ends with a shoal::error
// naming the PE at fault, within the bootstrap timeout (2 s here) rather than hanging.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/wire.hpp"
#include "scenarios.hpp"
#include "spawn.hpp"

namespace shoal_mp {
namespace {

namespace wire = shoal::detail::wire;

// This binary: it plays the PEs of the jobs it starts.
std::string self_path() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

const std::string kSecret = "0123456789abcdef0123456789abcdef";
constexpr double kBound = 30;  // no scenario may take longer than this (they should take ~2-3 s)

struct job_env {
  int n_pes = 4;
  std::string addr = "127.0.0.1:" + std::to_string(free_port());
  std::string scenario;
  std::string timeout = "2";
  std::vector<std::pair<std::string, std::string>> extra_env = {};  // for every PE, after the ones above
};

process_spec pe_process(const job_env& job, int pe, int n_pes_claimed) {
  process_spec spec{{self_path()},
                    {{"SHOAL_RANK", std::to_string(pe)},
                     {"SHOAL_WORLD_SIZE", std::to_string(n_pes_claimed)},
                     {"SHOAL_LOCAL_RANK", std::to_string(pe)},
                     {"SHOAL_LOCAL_SIZE", std::to_string(n_pes_claimed)},
                     {"SHOAL_BOOTSTRAP_ADDR", job.addr},
                     {"SHOAL_BOOTSTRAP_SECRET", kSecret},
                     {"SHOAL_BOOTSTRAP_TIMEOUT", job.timeout},
                     {"SHOAL_MP_SCENARIO", job.scenario}}};
  spec.env.insert(spec.env.end(), job.extra_env.begin(), job.extra_env.end());
  return spec;
}

std::vector<process_end> run_job(const job_env& job, const std::vector<int>& expendable = {}) {
  process_group group;
  for (int pe = 0; pe < job.n_pes; ++pe) group.start(pe_process(job, pe, job.n_pes));
  return group.wait(kBound, expendable);
}

bool contains(const std::string& text, std::string_view word) { return text.find(word) != std::string::npos; }

// The PE threw shoal::error and its text has every word.
void expect_caught(const process_end& end, int pe, std::initializer_list<std::string_view> words) {
  EXPECT_EQ(end.exit_code(), kCaughtError) << "PE " << pe << " output:\n" << end.output;
  EXPECT_TRUE(contains(end.output, "caught: ")) << "PE " << pe << " output:\n" << end.output;
  for (std::string_view w : words)
    EXPECT_TRUE(contains(end.output, w)) << "PE " << pe << " lacks '" << w << "':\n" << end.output;
}

TEST(BootstrapFaults, PeNeverReachesTheRendezvous) {
  job_env job{.scenario = "never_reach:2"};
  auto ends = run_job(job, {2});
  for (int pe : {0, 1, 3})
    expect_caught(ends[pe], pe, {"PE 2 never reached the rendezvous at " + job.addr, "within 2 s"});
}

// PE 0 starts 1.5 s after the others (timeout 2 s) and PE 2 never comes. The hub's verdict, "PE 2 never
// reached the rendezvous", comes 2 s after the hub started: 3.5 s into the others' waits, past the 3 s they
// would wait counting from their own start. They must wait for it (counting from the hub's welcome) and
// name PE 2, not give up first and blame PE 0, nor leave PE 0's hub blaming them.
TEST(BootstrapFaults, LateHubStillNamesTheMissingPe) {
  job_env job{.scenario = "late_hub:2"};
  auto ends = run_job(job, {2});
  for (int pe : {0, 1, 3}) expect_caught(ends[pe], pe, {"PE 2 never reached the rendezvous"});
}

TEST(BootstrapFaults, HubNeverStarts) {
  job_env job{.n_pes = 3, .scenario = "never_reach:0"};
  auto ends = run_job(job, {0});
  for (int pe : {1, 2}) expect_caught(ends[pe], pe, {"rendezvous hub (PE 0)", job.addr});
}

// PE 0 at its limit of open files: its hub cannot accept the other PEs' connections. It must say so at once
// (it used to spin on the listener until the deadline and then blame a PE that never got in), and every
// other PE must end with an error naming PE 0's hub.
TEST(BootstrapFaults, HubOutOfDescriptorsSaysSo) {
  // Room for the hub's own descriptors, not for 8 connections.
  job_env job{.n_pes = 8, .scenario = "few_files:0", .extra_env = {{"SHOAL_MP_FILE_ROOM", "6"}}};
  auto ends = run_job(job);
  expect_caught(ends[0], 0, {"cannot accept PE connections", "ulimit -n"});
  for (int pe = 1; pe < job.n_pes; ++pe) expect_caught(ends[pe], pe, {"PE 0"});
}

TEST(BootstrapFaults, PeExitsDuringACollective) {
  job_env job{.scenario = "exit:2"};
  auto ends = run_job(job);
  EXPECT_EQ(ends[2].exit_code(), kDiedOnPurpose) << ends[2].output;
  for (int pe : {0, 1, 3}) expect_caught(ends[pe], pe, {"PE 2 died (connection closed)", "all_gather #5"});
}

TEST(BootstrapFaults, PeKilledDuringACollective) {
  job_env job{.n_pes = 3, .scenario = "kill:1"};
  auto ends = run_job(job);
  EXPECT_TRUE(ends[1].killed_by(SIGKILL)) << ends[1].output;
  for (int pe : {0, 2}) expect_caught(ends[pe], pe, {"PE 1 died (connection closed)"});
}

TEST(BootstrapFaults, HubDiesDuringACollective) {
  job_env job{.n_pes = 3, .scenario = "exit:0"};
  auto ends = run_job(job);
  EXPECT_EQ(ends[0].exit_code(), kDiedOnPurpose) << ends[0].output;
  for (int pe : {1, 2}) expect_caught(ends[pe], pe, {"rendezvous hub in PE 0", "all_gather #5"});
}

TEST(BootstrapFaults, PesCallDifferentCollectives) {
  job_env job{.n_pes = 3, .scenario = "mismatch:1"};
  auto ends = run_job(job);
  for (int pe = 0; pe < 3; ++pe) expect_caught(ends[pe], pe, {"different collectives as #1", "PE 1 broadcast"});
}

TEST(BootstrapFaults, PesDisagreeAboutTheWorldSize) {
  job_env job{.n_pes = 3, .scenario = "init_only"};
  process_group group;
  group.start(pe_process(job, 0, 3));
  group.start(pe_process(job, 1, 3));
  group.start(pe_process(job, 2, 4));
  auto ends = group.wait(kBound);
  for (int pe : {0, 2}) expect_caught(ends[pe], pe, {"disagree about the job size", "PE 2", "4 PEs"});
  // PE 1 either heard the same or, arriving after the hub gave up, could not reach it: a failure either way.
  EXPECT_EQ(ends[1].exit_code(), kCaughtError) << ends[1].output;
}

TEST(BootstrapFaults, TwoProcessesClaimOnePe) {
  job_env job{.n_pes = 3, .scenario = "init_only"};
  process_group group;
  group.start(pe_process(job, 0, 3));
  group.start(pe_process(job, 1, 3));
  group.start(pe_process(job, 1, 3));
  auto ends = group.wait(kBound);
  expect_caught(ends[0], 0, {"two processes claim PE 1"});
  for (int i : {1, 2}) EXPECT_EQ(ends[i].exit_code(), kCaughtError) << ends[i].output;
}

// --- connections that are not PEs of the job

int connect_to(const std::string& addr) {
  auto colon = addr.rfind(':');
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(static_cast<std::uint16_t>(std::stoi(addr.substr(colon + 1))));
  ::inet_pton(AF_INET, addr.substr(0, colon).c_str(), &in.sin_addr);
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(s, reinterpret_cast<sockaddr*>(&in), sizeof in) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

void send_bytes(int s, const void* data, std::size_t n) {
  ASSERT_EQ(::send(s, data, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
}

// True when the hub closed `s` without sending it anything (it learns nothing about the job).
bool closed_silently(int s) {
  pollfd p{s, POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) return false;
  char c;
  return ::recv(s, &c, 1, 0) <= 0;
}

TEST(BootstrapFaults, ForeignConnectionsAreDroppedAndTheJobCompletes) {
  job_env job{.n_pes = 4, .scenario = "busy", .timeout = "20"};
  process_group group;
  group.start(pe_process(job, 0, job.n_pes));  // the others start after the garbage, so it meets the hub

  int probe = -1;
  for (int i = 0; i < 1000 && probe < 0; ++i) {
    probe = connect_to(job.addr);
    if (probe < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(probe, 0) << "the hub never listened";
  ::close(probe);  // a connection that closes without a hello

  wire::hello wrong{
      .secret = "ffffffffffffffffffffffffffffffff", .pe = 1, .n_pes = 4, .pid = 1, .host = "x", .fd_socket = "y"};
  std::vector<std::byte> hello = wire::encode_hello(wrong);
  wire::header_bytes head = wire::encode_header({wire::msg_type::hello, 0, hello.size()});

  int wrong_secret = connect_to(job.addr);
  send_bytes(wrong_secret, head.data(), head.size());
  send_bytes(wrong_secret, hello.data(), hello.size());

  int http = connect_to(job.addr);
  std::string get = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
  send_bytes(http, get.data(), get.size());

  int oversized = connect_to(job.addr);
  wire::header_bytes huge = wire::encode_header({wire::msg_type::hello, 0, std::uint64_t{1} << 40});
  send_bytes(oversized, huge.data(), huge.size());

  int truncated = connect_to(job.addr);
  send_bytes(truncated, head.data(), head.size());
  send_bytes(truncated, hello.data(), hello.size() / 2);
  ::close(truncated);

  int malformed = connect_to(job.addr);
  std::vector<std::byte> junk(hello.size(), std::byte{0xff});
  send_bytes(malformed, head.data(), head.size());
  send_bytes(malformed, junk.data(), junk.size());

  int silent = connect_to(job.addr);  // says nothing, stays open through the whole job

  for (int s : {wrong_secret, http, oversized, malformed}) {
    EXPECT_TRUE(closed_silently(s));
    ::close(s);
  }
  for (int pe = 1; pe < job.n_pes; ++pe) group.start(pe_process(job, pe, job.n_pes));
  auto ends = group.wait(kBound);
  ::close(silent);
  for (int pe = 0; pe < job.n_pes; ++pe) EXPECT_EQ(ends[pe].exit_code(), 0) << "PE " << pe << ":\n" << ends[pe].output;
  for (std::string_view warning : {"wrong secret", "bad magic", "a hello of 1099511627776 bytes", "truncated hello",
                                   "malformed hello", "closed without sending a hello"})
    EXPECT_TRUE(contains(ends[0].output, warning)) << "no warning '" << warning << "' in PE 0's output:\n"
                                                   << ends[0].output;
}

// Reads the hub's messages on `s` until one says the job failed; its text, or "" when the hub closed (or
// went quiet for 10 s) without saying so.
std::string failure_heard(int s) {
  auto read_all = [s](void* data, std::size_t n) {
    auto* at = static_cast<char*>(data);
    while (n > 0) {
      pollfd p{s, POLLIN, 0};
      if (::poll(&p, 1, 10000) != 1) return false;
      ssize_t got = ::recv(s, at, n, 0);
      if (got <= 0) return false;
      at += got;
      n -= static_cast<std::size_t>(got);
    }
    return true;
  };
  for (;;) {
    wire::header_bytes head{};
    if (!read_all(head.data(), head.size())) return "";
    std::optional<wire::header> h = wire::decode_header(head);
    if (!h) return "";
    std::vector<std::byte> payload(h->size);
    if (!read_all(payload.data(), payload.size())) return "";
    if (h->type != wire::msg_type::failure) continue;  // a welcome
    std::optional<wire::failure> f = wire::decode_failure(payload);
    return f ? f->message : "";
  }
}

void send_hello(int s, int pe, int n_pes) {
  wire::hello hello{.secret = kSecret, .pe = pe, .n_pes = n_pes, .pid = 1, .host = "x", .fd_socket = "y"};
  std::vector<std::byte> payload = wire::encode_hello(hello);
  wire::header_bytes head = wire::encode_header({wire::msg_type::hello, 0, payload.size()});
  send_bytes(s, head.data(), head.size());
  send_bytes(s, payload.data(), payload.size());
}

// A PE whose connection the hub accepted but whose hello comes after the job failed, and one that connects
// only then (while the hub still delivers the failure), must both hear why the job failed. The hub used to close the
// first at once and stop listening, so each ended up blaming PE 0.
TEST(BootstrapFaults, PesThatSayHelloAfterTheFailureHearIt) {
  job_env job{.n_pes = 4, .scenario = "init_only", .timeout = "5"};
  process_group hub_pe;
  hub_pe.start(pe_process(job, 0, job.n_pes));
  int early = -1;
  for (int i = 0; i < 1000 && early < 0; ++i) {
    early = connect_to(job.addr);
    if (early < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(early, 0) << "the hub never listened";

  process_group wrong_size;  // fails the job; it ends once told so, so the failure came before the hellos below
  wrong_size.start(pe_process(job, 1, job.n_pes + 1));
  auto wrong_end = wrong_size.wait(kBound);
  expect_caught(wrong_end[0], 1, {"disagree about the job size"});

  // Connected while `early` still keeps the hub delivering: a hub left with no connection stops.
  int late = connect_to(job.addr);
  ASSERT_GE(late, 0) << "the hub stopped listening before the failure was delivered";
  send_hello(early, 2, job.n_pes);
  EXPECT_TRUE(contains(failure_heard(early), "disagree about the job size"));
  ::close(early);
  send_hello(late, 3, job.n_pes);
  EXPECT_TRUE(contains(failure_heard(late), "disagree about the job size"));
  ::close(late);
  auto hub_end = hub_pe.wait(kBound);
  expect_caught(hub_end[0], 0, {"disagree about the job size"});
}

// --- the same faults under the real launcher

process_spec under_shoalrun(int n, const std::string& scenario) {
  return {{SHOALRUN_PATH, "-n", std::to_string(n), "--timeout", "60", "--", self_path()},
          {{"SHOAL_MP_SCENARIO", scenario}, {"SHOAL_BOOTSTRAP_TIMEOUT", "2"}}};
}

void need_shoalrun() {
  if (!std::filesystem::exists(SHOALRUN_PATH)) GTEST_SKIP() << "shoalrun is not built (" << SHOALRUN_PATH << ")";
}

TEST(BootstrapFaultsUnderShoalrun, PeNeverReachesTheRendezvous) {
  need_shoalrun();
  if (IsSkipped()) return;
  process_group group;
  group.start(under_shoalrun(4, "never_reach:3"));
  process_end end = group.wait(kBound)[0];
  EXPECT_NE(end.exit_code(), 0) << end.output;
  EXPECT_TRUE(contains(end.output, "PE 3 never reached the rendezvous")) << end.output;
}

TEST(BootstrapFaultsUnderShoalrun, DeadPeFailsTheJob) {
  need_shoalrun();
  if (IsSkipped()) return;
  process_group group;
  group.start(under_shoalrun(4, "exit:1"));
  process_end end = group.wait(kBound)[0];
  // Either shoalrun sees PE 1's death first and names it, or a survivor reports it first (and shoalrun
  // then names that survivor, whose message names PE 1).
  EXPECT_NE(end.exit_code(), 0) << end.output;
  EXPECT_TRUE(contains(end.output, "rank 1 exited with status 7") || contains(end.output, "PE 1 died")) << end.output;
}

}  // namespace
}  // namespace shoal_mp
