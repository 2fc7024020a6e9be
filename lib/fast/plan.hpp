// Which all-reduce serves which message size on one communicator: cc's LL
// kernel, its one-shot or two-shot kernel, or ncclAllReduce. A plan is
// decided once at init by rank 0 (from a measurement, a cached measurement or
// the user's text) and shared, so every rank picks the same path for the
// same call: a rank in cc's kernel while another is in NCCL would deadlock.
//
// Text form, as CC_FAST_ALLREDUCE_PLAN takes it and cc_comm_allreduce_plan
// returns it: "ll:256K,oneshot:8M,blocks:64" = LL up to 256 KiB, one-shot
// above that up to 8 MiB, ncclAllReduce above; one-shot and two-shot use at
// most 64 thread blocks. "nccl" alone: ncclAllReduce for every size.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cc::fast {

enum class Algo : uint8_t { nccl = 0, ll = 1, oneshot = 2, twoshot = 3 };
inline constexpr int kAlgos = 4;
const char* algo_name(Algo a);

// The largest message each of cc's kernels can take on a communicator (its
// shared buffers are sized for these).
struct Capacity {
  size_t ll = 0, oneshot = 0, twoshot = 0;
  size_t of(Algo a) const;
};

struct Plan {
  struct Step {
    Algo algo = Algo::nccl;
    size_t max_bytes = 0;  // this step serves sizes up to here (after the previous step's)
  };
  static constexpr int kMaxSteps = 16;
  std::array<Step, kMaxSteps> steps{};
  int nsteps = 0;  // sizes above the last step's max_bytes: nccl
  int blocks = 0;  // thread blocks one-shot and two-shot use at most; 0 = the kernels' default

  // The path for a message of `bytes` (> 0). Hot path: a few compares.
  Algo choose(size_t bytes) const {
    for (int i = 0; i < nsteps; ++i)
      if (bytes <= steps[static_cast<size_t>(i)].max_bytes)
        return steps[static_cast<size_t>(i)].algo;
    return Algo::nccl;
  }
  bool uses_kernels() const;
};

// "ll:256K,oneshot:8M,blocks:64"; "nccl" for a plan of no kernel steps.
std::string format_plan(const Plan& plan);
// "256K", "8M", "1536K", "4100" (bytes).
std::string format_bytes(size_t bytes);

// Parses the text form. Steps must name known paths with sizes that grow;
// "auto" and "measure" are not plans (the caller handles them). False with
// the reason in `error`.
bool parse_plan(const std::string& text, Plan* out, std::string* error);

// Caps a plan to what the kernels can take: a step beyond a kernel's
// capacity ends at it (the rest goes to NCCL). Returns whether it changed.
bool clamp_plan(Plan* plan, const Capacity& cap);

// One measured size: mean microseconds per call of ncclAllReduce and of each
// of cc's kernels (negative: not measured there).
struct Sample {
  size_t bytes = 0;
  double us[kAlgos] = {-1, -1, -1, -1};  // indexed by Algo
};

// The plan from measurements at growing sizes. samples[0] is the floor: only
// its NCCL time is used. Each later sample i stands for the sizes in
// (samples[i-1].bytes, samples[i].bytes]: a kernel serves them only when its
// time at the top of that range is at most `margin` x NCCL's lower time at the
// two ends, so with times that grow with size no size in the range is slower
// than NCCL. The fastest such kernel wins; sizes above the last sample: NCCL.
Plan decide_plan(const std::vector<Sample>& samples, const Capacity& cap, double margin,
                 int blocks);

}  // namespace cc::fast
