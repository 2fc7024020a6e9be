// The measurement behind an "auto" plan: every rank times ncclAllReduce and
// each of cc's kernels at the same growing sizes, at the same moments; the
// slowest rank's times (reduced over NCCL) feed decide_plan, so every rank
// derives the same plan from the same numbers.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nccl.h>

#include "lib/fast/channel.hpp"
#include "lib/fast/plan.hpp"

namespace cc::fast {

struct Measurement {
  std::vector<Sample> samples;  // the largest time over ranks, per size and path
  int blocks = 0;               // the grid cap chosen for one-shot and two-shot
  double ms = 0;                // how long the measurement took here
};

// A kernel serves a range only when at most this fraction of NCCL's time.
inline constexpr double kPlanMargin = 0.95;

// Collective over `nccl` and the channel's ranks (float32 sums, out of
// place, on a stream of its own). False with the reason when a call failed
// or the deadline passed (then the channel's kernels have been told to give
// up, and NCCL may still hold the stream: the caller aborts the NCCL
// communicator).
bool measure(Channel* ch, ncclComm_t nccl, std::chrono::steady_clock::time_point deadline,
             Measurement* out, std::string* why);

}  // namespace cc::fast
