// The all-reduce plan (lib/fast/plan.*): its text form, capping to the
// kernels' capacity, and the rule that turns measurements into a plan such
// that no size goes to a kernel slower than NCCL at that size.
#include <catch2/catch.hpp>

#include "lib/fast/plan.hpp"

using namespace cc::fast;

namespace {

Plan parsed(const std::string& text) {
  Plan p;
  std::string why;
  INFO(text);
  REQUIRE(parse_plan(text, &p, &why));
  return p;
}

Sample sample(size_t bytes, double nccl, double ll, double oneshot, double twoshot) {
  Sample s;
  s.bytes = bytes;
  s.us[0] = nccl;
  s.us[1] = ll;
  s.us[2] = oneshot;
  s.us[3] = twoshot;
  return s;
}

constexpr size_t K = 1024, M = 1024 * 1024;
const Capacity kCap{256 * K, 8 * M, 8 * M};

}  // namespace

TEST_CASE("plan text: parsed, chosen from and written back alike") {
  const Plan p = parsed("ll:256K,oneshot:8M,blocks:64");
  CHECK(p.choose(1) == Algo::ll);
  CHECK(p.choose(256 * K) == Algo::ll);
  CHECK(p.choose(256 * K + 1) == Algo::oneshot);
  CHECK(p.choose(8 * M) == Algo::oneshot);
  CHECK(p.choose(8 * M + 1) == Algo::nccl);
  CHECK(p.blocks == 64);
  CHECK(format_plan(p) == "ll:256K,oneshot:8M,blocks:64");
  CHECK(format_plan(parsed("nccl")) == "nccl");
  CHECK(parsed("nccl").choose(1) == Algo::nccl);
  CHECK(format_plan(parsed("oneshot:65536,twoshot:1536K,nccl:64M")) == "oneshot:64K,twoshot:1536K");
  CHECK(format_plan(parsed("nccl:1K,ll:4100")) == "nccl:1K,ll:4100");
  CHECK(parsed("ll:1MiB").choose(M) == Algo::ll);
}

TEST_CASE("plan text: what is not a plan is refused in words") {
  Plan p;
  std::string why;
  CHECK_FALSE(parse_plan("fast:1M", &p, &why));
  CHECK_THAT(why, Catch::Contains("'fast' is none of ll, oneshot, twoshot and nccl"));
  CHECK_FALSE(parse_plan("ll:1M,oneshot:64K", &p, &why));
  CHECK_THAT(why, Catch::Contains("must grow"));
  CHECK_FALSE(parse_plan("ll:1Q", &p, &why));
  CHECK_THAT(why, Catch::Contains("is not a size"));
  CHECK_FALSE(parse_plan("ll", &p, &why));
  CHECK_THAT(why, Catch::Contains("is not PATH:SIZE"));
  CHECK_FALSE(parse_plan("ll:64K,blocks:0", &p, &why));
  CHECK_THAT(why, Catch::Contains("thread blocks"));
  CHECK_FALSE(parse_plan("", &p, &why));
}

TEST_CASE("plan capped to the kernels: the part a kernel cannot take goes to NCCL") {
  Plan p = parsed("ll:1M,oneshot:64M");
  CHECK(clamp_plan(&p, kCap));
  CHECK(format_plan(p) == "ll:256K,nccl:1M,oneshot:8M");
  CHECK(p.choose(512 * K) == Algo::nccl);
  CHECK(p.choose(64 * M) == Algo::nccl);
  Plan fits = parsed("ll:64K,twoshot:8M");
  CHECK_FALSE(clamp_plan(&fits, kCap));
  CHECK(format_plan(fits) == "ll:64K,twoshot:8M");
}

TEST_CASE(
    "plan from measurements: a kernel takes a range only when faster than NCCL at both ends") {
  const std::vector<Sample> samples{
      sample(8, 10.0, -1, -1, -1),           sample(64 * K, 11.0, 5.0, 7.0, 8.0),  // ll best
      sample(256 * K, 12.0, 9.0, 8.0, 9.0),                                        // oneshot best
      sample(512 * K, 12.5, -1, 11.0, 12.0),  // oneshot, 11 <= 0.95 * 12 = 11.4
      sample(1 * M, 13.0, -1, 12.0, 12.5),    // 12 > 0.95 * 12.5: NCCL
      sample(2 * M, 28.0, -1, 12.5, 14.0),    // NCCL's floor 13: 12.5 > 12.35: NCCL
      sample(4 * M, 33.0, -1, 20.0, 19.0),    // twoshot best
      sample(8 * M, 47.0, -1, 30.0, 31.0)};   // oneshot best
  const Plan p = decide_plan(samples, kCap, 0.95, 32);
  CHECK(format_plan(p) == "ll:64K,oneshot:512K,nccl:2M,twoshot:4M,oneshot:8M,blocks:32");
  CHECK(p.choose(100) == Algo::ll);
  CHECK(p.choose(700 * K) == Algo::nccl);
  CHECK(p.choose(3 * M) == Algo::twoshot);
  CHECK(p.choose(16 * M) == Algo::nccl);
}

TEST_CASE(
    "plan from measurements: a kernel past its capacity or slower everywhere is never chosen") {
  const std::vector<Sample> slow{sample(8, 5.0, -1, -1, -1), sample(64 * K, 6.0, 5.9, 7.0, 8.0),
                                 sample(8 * M, 30.0, 1.0, 40.0, 41.0)};
  // LL at 8M is fast but cannot take 8M; the rest are slower than NCCL.
  CHECK(format_plan(decide_plan(slow, kCap, 0.95, 64)) == "nccl");
  // A noisy high NCCL time at the top of a range does not open it: the lower end counts.
  const std::vector<Sample> noisy{sample(8, 10.0, -1, -1, -1), sample(64 * K, 6.0, 5.8, -1, -1)};
  CHECK(format_plan(decide_plan(noisy, kCap, 0.95, 64)) == "nccl");
}
