// The sockets of the reachability test before NCCL's init: a listener on the
// address NCCL will use, which answers each test connection with its rank,
// and the test connections to the ranks of a plan, all at once under one
// deadline. A test connection says which job, generation and rank it wants,
// so an answer from another process (a port forward, a NAT leading
// elsewhere) is no success. No CUDA here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.hpp"
#include "common/unique_fd.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::comm {

// Names one generation of one job on the wire (a hash of both).
uint64_t preflight_tag(const std::string& job_id, uint32_t comm_number);

class PreflightListener {
 public:
  // Listens on addr (numeric; IPv6 link-local needs `ifname` for its scope),
  // any port. Errors are CC_ERR_SYSTEM naming the address.
  static Status open(const std::string& addr, const std::string& ifname,
                     std::unique_ptr<PreflightListener>* out);
  ~PreflightListener();
  PreflightListener(const PreflightListener&) = delete;
  PreflightListener& operator=(const PreflightListener&) = delete;

  int port() const { return port_; }
  // Starts answering test connections of `tag` as `rank`, on a thread of
  // its own, until destruction.
  void start(uint64_t tag, int32_t rank);
  // Test connections answered so far (for tests and logs).
  int answered() const { return answered_.load(); }

 private:
  PreflightListener(UniqueFd fd, int port);
  void serve();

  UniqueFd fd_;
  UniqueFd wake_;  // an eventfd: written once to stop serve()
  int port_ = 0;
  uint64_t tag_ = 0;
  int32_t rank_ = -1;
  std::atomic<int> answered_{0};
  std::thread thread_;
};

// Connects to every target at once and asks each to answer as its rank of
// `tag`; one result per target, in order, within `timeout`.
std::vector<rv::ProbeResult> probe_targets(const std::vector<rv::ProbeTarget>& targets,
                                           uint64_t tag, int32_t from,
                                           std::chrono::milliseconds timeout);

}  // namespace cc::comm
