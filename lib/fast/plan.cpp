#include "lib/fast/plan.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "common/enum_names.hpp"
#include "common/units.hpp"

namespace cc::fast {
namespace {

constexpr size_t kKi = 1024;

bool algo_from(const std::string& name, Algo* out) {
  for (int a = 0; a < kAlgos; ++a)
    if (name == algo_name(static_cast<Algo>(a))) {
      *out = static_cast<Algo>(a);
      return true;
    }
  return false;
}

// Appends a step, merging it into the last one when the path is the same.
void push_step(Plan* plan, Algo algo, size_t max_bytes) {
  if (plan->nsteps > 0 && plan->steps[static_cast<size_t>(plan->nsteps - 1)].algo == algo) {
    plan->steps[static_cast<size_t>(plan->nsteps - 1)].max_bytes = max_bytes;
    return;
  }
  if (plan->nsteps == Plan::kMaxSteps) return;
  plan->steps[static_cast<size_t>(plan->nsteps++)] = {algo, max_bytes};
}

// Drops trailing NCCL steps (sizes past the last step go to NCCL anyway).
void trim(Plan* plan) {
  while (plan->nsteps > 0 && plan->steps[static_cast<size_t>(plan->nsteps - 1)].algo == Algo::nccl)
    --plan->nsteps;
}

}  // namespace

constexpr std::array kAlgoNames{"nccl", "ll", "oneshot", "twoshot"};

const char* algo_name(Algo a) {
  return cc::enum_name<Algo::nccl, Algo::twoshot>(kAlgoNames, a, "?");
}

size_t Capacity::of(Algo a) const {
  switch (a) {
    case Algo::ll:
      return ll;
    case Algo::oneshot:
      return oneshot;
    case Algo::twoshot:
      return twoshot;
    case Algo::nccl:
      break;
  }
  return ~size_t{0};
}

bool Plan::uses_kernels() const {
  for (int i = 0; i < nsteps; ++i)
    if (steps[static_cast<size_t>(i)].algo != Algo::nccl) return true;
  return false;
}

std::string format_bytes(size_t bytes) {
  if (bytes != 0 && bytes % (kKi * kKi) == 0) return std::to_string(bytes / (kKi * kKi)) + "M";
  if (bytes != 0 && bytes % kKi == 0) return std::to_string(bytes / kKi) + "K";
  return std::to_string(bytes);
}

std::string format_plan(const Plan& plan) {
  std::string out;
  for (int i = 0; i < plan.nsteps; ++i) {
    const Plan::Step& s = plan.steps[static_cast<size_t>(i)];
    if (!out.empty()) out += ",";
    out += std::string(algo_name(s.algo)) + ":" + format_bytes(s.max_bytes);
  }
  if (out.empty()) return "nccl";
  if (plan.blocks > 0) out += ",blocks:" + std::to_string(plan.blocks);
  return out;
}

bool parse_plan(const std::string& text, Plan* out, std::string* error) {
  Plan plan;
  if (text == "nccl") {
    *out = plan;
    return true;
  }
  size_t pos = 0;
  size_t last = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
      *error = "'" + item + "' is not PATH:SIZE (PATH one of ll, oneshot, twoshot, nccl; " +
               "e.g. ll:256K,oneshot:8M) nor blocks:N";
      return false;
    }
    const std::string name = item.substr(0, colon), value = item.substr(colon + 1);
    if (name == "blocks") {
      char* end = nullptr;
      const long blocks = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || blocks < 1 || blocks > 1024) {
        *error = "blocks:" + value + " is not a number of thread blocks from 1 to 1024";
        return false;
      }
      plan.blocks = static_cast<int>(blocks);
    } else {
      Algo algo = Algo::nccl;
      if (!algo_from(name, &algo)) {
        *error = "'" + name + "' is none of ll, oneshot, twoshot and nccl";
        return false;
      }
      uint64_t bytes = 0;
      if (!parse_bytes(value, &bytes) || bytes == 0) {
        *error = "'" + value + "' (after " + name + ":) is not a size such as 65536, 64K or 8M";
        return false;
      }
      if (bytes <= last) {
        *error = "the sizes must grow from one step to the next ('" + item + "' does not)";
        return false;
      }
      if (plan.nsteps == Plan::kMaxSteps) {
        *error = "more than " + std::to_string(Plan::kMaxSteps) + " steps";
        return false;
      }
      plan.steps[static_cast<size_t>(plan.nsteps++)] = {algo, bytes};
      last = bytes;
    }
    pos = comma + 1;
  }
  trim(&plan);
  *out = plan;
  return true;
}

bool clamp_plan(Plan* plan, const Capacity& cap) {
  Plan fixed;
  fixed.blocks = plan->blocks;
  size_t lower = 0;
  bool changed = false;
  for (int i = 0; i < plan->nsteps; ++i) {
    const Plan::Step s = plan->steps[static_cast<size_t>(i)];
    const size_t top = std::min(s.max_bytes, cap.of(s.algo));
    if (top != s.max_bytes) changed = true;
    if (top > lower) push_step(&fixed, s.algo, top);
    if (top < s.max_bytes) push_step(&fixed, Algo::nccl, s.max_bytes);
    lower = s.max_bytes;
  }
  trim(&fixed);
  *plan = fixed;
  return changed;
}

Plan decide_plan(const std::vector<Sample>& samples, const Capacity& cap, double margin,
                 int blocks) {
  Plan plan;
  plan.blocks = blocks;
  for (size_t i = 1; i < samples.size(); ++i) {
    const Sample& lo = samples[i - 1];
    const Sample& hi = samples[i];
    const size_t nccl = static_cast<size_t>(Algo::nccl);
    double nccl_floor = lo.us[nccl];
    if (hi.us[nccl] > 0 && (nccl_floor <= 0 || hi.us[nccl] < nccl_floor)) nccl_floor = hi.us[nccl];
    Algo best = Algo::nccl;
    double best_us = 0;
    for (int a = 1; a < kAlgos; ++a) {
      const double t = hi.us[a];
      if (t <= 0 || cap.of(static_cast<Algo>(a)) < hi.bytes) continue;
      if (nccl_floor <= 0 || t > margin * nccl_floor) continue;
      if (best == Algo::nccl || t < best_us) {
        best = static_cast<Algo>(a);
        best_us = t;
      }
    }
    push_step(&plan, best, hi.bytes);
  }
  trim(&plan);
  return plan;
}

}  // namespace cc::fast
