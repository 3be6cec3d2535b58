// Parts that one PE of shoal_mp_tests plays in a fault scenario; the BootstrapFaults tests start the
// processes and checks how each one ends.
#pragma once

namespace shoal_mp {

// Exit status of a PE whose bootstrap call threw shoal::error (as the scenario expects); the error's
// text is printed on stderr as "caught: <what>".
inline constexpr int kCaughtError = 3;
// Exit status of a PE that plays the dying part.
inline constexpr int kDiedOnPurpose = 7;

// `spec` is "<name>" or "<name>:<pe>":
//   init_only          bootstrap, one barrier, exit 0
//   never_reach:K      PE K sleeps instead of bootstrapping; the others bootstrap
//   exit:K / kill:K    all do four all_gathers; PE K then _exit(7)s / raises SIGKILL, the others start a fifth
//   mismatch:K         PE K calls broadcast where the others call all_gather
//   busy               bootstrap, then 200 verified all_gathers and a barrier, exit 0
int run_scenario(const char* spec);

}  // namespace shoal_mp
