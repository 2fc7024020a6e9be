#include "lib/comm/preflight.hpp"

#include <algorithm>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/return_if_error.hpp"
#include "lib/comm/deadline.hpp"

namespace cc::comm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long the server waits for every member's endpoint (one that never
// sends it runs a cc without the test: then the test is skipped), and for
// every member's report (one that never reports is stuck: the verdict is
// decided without it). Healthy members need a few milliseconds for both.
constexpr milliseconds kReadyWindow{10000};
constexpr milliseconds kReportWindow{5000};

uint32_t window(milliseconds w, Clock::time_point deadline) {
  return static_cast<uint32_t>(std::min(remaining(deadline), w).count());
}

}  // namespace

Status preflight_enabled(const settings::Getenv& getenv, bool* on) {
  int choice = 1;  // "1"
  CC_RETURN_IF_ERROR(settings::read_choice(settings::Id::preflight, getenv, &choice));
  *on = choice % 2 == 1;  // 0, 1, off, on, false, true
  return Status::success();
}

void preflight_listen(PreflightSetup* setup, const std::string& who) {
  if (!setup->enabled || !setup->cannot_start.ok() || setup->addr.empty()) return;
  if (Status st = PreflightListener::open(setup->addr, setup->ifname, &setup->listener); !st.ok())
    log().warn("{}: {}; the other ranks will not test their connections to this one", who,
               st.message);
}

Status run_preflight(rv::Membership& client, const std::string& job_id, uint32_t comm_number,
                     int rank, PreflightSetup& setup, Clock::time_point deadline,
                     const std::string& who) {
  const auto start = Clock::now();
  const uint64_t tag = preflight_tag(job_id, comm_number);
  if (setup.listener) setup.listener->start(tag, rank);
  rv::PreflightReady ready;
  ready.comm_number = comm_number;
  ready.enabled = setup.enabled;
  ready.host_key = setup.host_key;
  ready.addr = setup.addr;
  ready.port = setup.listener ? static_cast<uint32_t>(setup.listener->port()) : 0;
  ready.ifname = setup.ifname;
  ready.user_ifname = setup.user_ifname;
  ready.route_ifname = setup.route_ifname;
  ready.route_addr = setup.route_addr;
  ready.timeout_ms = window(kReadyWindow, deadline);
  rv::PreflightPlan plan;
  CC_RETURN_IF_ERROR(client.preflight_ready(ready, &plan));
  if (plan.step == rv::PreflightStep::skipped) {
    if (setup.enabled) log().warn("{}: {}", who, printable(plan.note));
    return Status::success();
  }
  if (plan.step == rv::PreflightStep::probe) {
    rv::PreflightReport report;
    report.comm_number = comm_number;
    report.results = probe_targets(plan.targets, tag, rank, kProbeTimeout);
    report.timeout_ms = window(kReportWindow, deadline);
    CC_RETURN_IF_ERROR(client.preflight_report(report));
  }
  log().debug("{}: reachability test passed in {} ms ({} connection(s) from here)", who,
              std::chrono::duration_cast<milliseconds>(Clock::now() - start).count(),
              plan.targets.size());
  return Status::success();
}

}  // namespace cc::comm
