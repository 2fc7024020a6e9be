// What the reachability test adds to a healthy start of 2 ranks: two
// threads run cc_comm_init's path without NCCL (lib/comm/startup) on
// loopback, as two hosts, `rounds` times with the test and `rounds` times
// without; prints the medians and their difference. False when a start failed.
#pragma once

namespace cc_bench {

bool run_start_pair(int rounds);

}  // namespace cc_bench
