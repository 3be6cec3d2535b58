#include "shoal/world.hpp"

#include "base/config.hpp"
#include "base/log.hpp"
#include "host/world_impl.hpp"

namespace shoal {

world::world(std::unique_ptr<impl> impl) noexcept : impl_(std::move(impl)) {}
world::world(world&&) noexcept = default;
world& world::operator=(world&&) noexcept = default;
world::~world() = default;

int world::pe() const noexcept { return impl_->boot->pe(); }
int world::n_pes() const noexcept { return impl_->boot->n_pes(); }
shoal::bootstrap& world::bootstrap() const noexcept { return *impl_->boot; }

world init(init_options options) {
  auto state = std::make_unique<world::impl>();
  state->cfg = detail::config::load();
  state->boot = options.bootstrap ? std::move(options.bootstrap) : make_bootstrap_from_env();
  detail::set_log_pe(state->boot->pe());
  SHOAL_LOG_INFO(base, "initialized: pe {} of {}, node {} of {}, local pe {} of {}", state->boot->pe(),
                 state->boot->n_pes(), state->boot->node(), state->boot->n_nodes(), state->boot->local_pe(),
                 state->boot->local_size());
  return world(std::move(state));
}

}  // namespace shoal
