#include "output_relay.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>

namespace shoal::launcher {

void write_all(int fd, std::string_view bytes) noexcept {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

line_relay::line_relay(int rank, int dest_fd) : prefix_(fmt::format("[{}] ", rank)), dest_fd_(dest_fd) {}

void line_relay::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    std::size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(bytes);
      if (pending_.size() >= kMaxLineBytes) {
        emit(pending_);
        pending_.clear();
      }
      return;
    }
    if (pending_.empty()) {
      emit(bytes.substr(0, newline));
    } else {
      pending_.append(bytes.substr(0, newline));
      emit(pending_);
      pending_.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
}

void line_relay::finish() {
  if (pending_.empty()) return;
  emit(pending_);
  pending_.clear();
}

void line_relay::emit(std::string_view line) {
  out_.clear();
  out_.reserve(prefix_.size() + line.size() + 1);
  out_.append(prefix_).append(line).push_back('\n');
  write_all(dest_fd_, out_);
}

}  // namespace shoal::launcher
