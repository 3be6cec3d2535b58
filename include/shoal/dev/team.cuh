// Team queries inside a kernel. A team_handle comes from shoal::team::device_handle() on the host.
#pragma once

#include "shoal/team_handle.hpp"

namespace shoal {

__device__ inline int team_my_pe(const team_handle& t) { return t.index; }  // -1 outside the team
__device__ inline int team_n_pes(const team_handle& t) { return t.layout.size; }
// World PE of member `index`, or -1.
__device__ inline int team_pe(const team_handle& t, int index) { return t.layout.pe_at(index); }
// The index in team `to` of member `index` of `from`, or -1 (OpenSHMEM team_translate_pe).
__device__ inline int team_translate_pe(const team_handle& from, int index, const team_handle& to) {
  return from.layout.translate(index, to.layout);
}

}  // namespace shoal
