// Small vocabulary types shared by the host and device APIs.
#pragma once

namespace shoal {

// Comparison of a waited-on word against an operand: wait until `word <op> operand`.
enum class cmp { eq, ne, gt, ge, lt, le };

// Result of the waits that take their own timeout.
enum class wait_status { ok, timed_out };

// What a signal update does to the signal word.
enum class sig_op { set, add };

}  // namespace shoal
