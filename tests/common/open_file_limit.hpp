// Tests of what happens at the limit of open files: lowers this process's limit so that only a few more
// descriptors can be opened, and restores it when it goes out of scope.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

namespace shoal_test {

class open_file_limit {
 public:
  // Room for `room` descriptors more than are open now: a new descriptor takes the lowest free number,
  // which must lie below the limit. ok() says whether the limit was lowered.
  explicit open_file_limit(int room) {
    const int lowest_free = ::dup(0);
    if (lowest_free < 0 || ::getrlimit(RLIMIT_NOFILE, &saved_) != 0) return;
    ::close(lowest_free);
    rlimit low = saved_;
    low.rlim_cur = rlim_t(lowest_free + room);
    lowered_ = ::setrlimit(RLIMIT_NOFILE, &low) == 0;
    limit_ = low.rlim_cur;
  }
  ~open_file_limit() {
    if (lowered_) ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  open_file_limit(const open_file_limit&) = delete;
  open_file_limit& operator=(const open_file_limit&) = delete;

  bool ok() const { return lowered_; }
  rlim_t limit() const { return limit_; }

 private:
  rlimit saved_{};
  rlim_t limit_ = 0;
  bool lowered_ = false;
};

}  // namespace shoal_test
