// A blocking call that must not stop this thread's polling: see run_while_polling.
#pragma once

#include <atomic>
#include <exception>
#include <thread>

namespace shoal::detail {

// Runs `work` on a helper thread while the calling thread keeps calling `poll` (which returns true when it
// made progress, and otherwise the thread yields), then rethrows whatever `work` threw. For a bootstrap
// collective whose peers may need this PE's network progress (a flush, an emulated atomic) before they
// can reach the same collective.
template <typename Work, typename Poll>
void run_while_polling(Work&& work, Poll&& poll) {
  std::exception_ptr failure;
  std::atomic<bool> done{false};
  std::thread helper([&] {
    try {
      work();
    } catch (...) {
      failure = std::current_exception();
    }
    done.store(true, std::memory_order_release);
  });
  while (!done.load(std::memory_order_acquire))
    if (!poll()) std::this_thread::yield();
  helper.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace shoal::detail
