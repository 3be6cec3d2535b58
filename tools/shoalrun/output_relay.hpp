// Turns one child stream (stdout or stderr of one rank) into whole lines prefixed with the rank.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace shoal::launcher {

// Collects bytes of one child stream and writes each completed line to `dest_fd` as "[rank] line\n".
// Contract: a line is written with one write() where the destination allows it, and never split by
// another line, because shoalrun relays all streams from one thread. A partial last line (no '\n' before
// EOF) is written by finish() with a '\n' added. A line longer than kMaxLineBytes is cut into pieces,
// each written as a line of its own, so a child that never writes '\n' cannot grow shoalrun's memory.
class line_relay {
 public:
  static constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;

  line_relay(int rank, int dest_fd);

  void feed(std::string_view bytes);
  void finish();

 private:
  void emit(std::string_view line);

  std::string prefix_;
  int dest_fd_;
  std::string pending_;  // the current line, without its prefix, not yet terminated
  std::string out_;      // scratch for prefix + line + '\n'
};

// Writes all of `bytes` to `fd`, retrying on EINTR and partial writes. Errors (e.g. a closed pipe) drop
// the rest: losing output must not stop the job. A closed pipe is an error here, not a SIGPIPE, because
// shoalrun ignores SIGPIPE while it runs a job.
void write_all(int fd, std::string_view bytes) noexcept;

}  // namespace shoal::launcher
