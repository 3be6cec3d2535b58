// shoal::world: one PE's membership in a job. shoal::init() returns it; its destructor finalizes.
// There is no hidden global: a program may finalize and init again, and passes the world (or the
// handles it gives out) to whatever needs it.
#pragma once

#include <memory>

#include "shoal/bootstrap.hpp"

namespace shoal {

struct init_options {
  // Where PEs find each other. Null: detected from the launcher's environment (make_bootstrap_from_env).
  std::unique_ptr<shoal::bootstrap> bootstrap;
};

class world {
 public:
  world(world&&) noexcept;
  world& operator=(world&&) noexcept;
  world(const world&) = delete;
  world& operator=(const world&) = delete;
  ~world();

  int pe() const noexcept;
  int n_pes() const noexcept;
  shoal::bootstrap& bootstrap() const noexcept;

  struct impl;

 private:
  friend world init(init_options options);
  explicit world(std::unique_ptr<impl> impl) noexcept;
  std::unique_ptr<impl> impl_;
};

// Collective over all PEs of the job. Validates the whole SHOAL_* configuration first (a bad value is a
// shoal::error naming the variable), then bootstraps. Throws shoal::error on any failure.
world init(init_options options = {});

}  // namespace shoal
