// What a world owns. Private: grows with the heap, transports and teams.
#pragma once

#include <memory>

#include "base/config.hpp"
#include "shoal/bootstrap.hpp"
#include "shoal/world.hpp"

namespace shoal {

struct world::impl {
  detail::config cfg;
  std::unique_ptr<shoal::bootstrap> boot;
};

}  // namespace shoal
