// Starting processes with a hand-made environment and collecting how each ends, for the fault tests
// (which need what shoalrun deliberately does not offer: wrong sizes, duplicate PEs, survivors' output).
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace shoal_mp {

struct process_spec {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // added to this process's environment, minus
                                                         // every launcher and SHOAL_* variable
};

struct process_end {
  int wait_status = 0;
  std::string output;  // stdout and stderr together
  bool killed_by_driver = false;
  bool exited() const;
  int exit_code() const;  // -1 unless exited()
  bool killed_by(int signal) const;
};

class process_group {
 public:
  process_group() = default;
  process_group(const process_group&) = delete;
  process_group& operator=(const process_group&) = delete;
  ~process_group();  // kills whatever still runs

  int start(const process_spec& spec);  // returns the process's index
  // Waits for every process, reading their output. Once all but the `expendable` ones have ended those
  // are killed; after `max_seconds` everything left is killed (and marked killed_by_driver).
  std::vector<process_end> wait(double max_seconds, const std::vector<int>& expendable = {});

 private:
  struct child {
    pid_t pid = -1;
    int out_fd = -1;
    bool ended = false;
    process_end end;
  };
  std::vector<child> children_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

}  // namespace shoal_mp
