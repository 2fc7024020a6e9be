#include "lib/comm/rendezvous_join.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "common/log.hpp"
#include "common/who.hpp"

namespace cc::comm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  return std::max(left, milliseconds(1));
}

bool is_ipv6_literal(const std::string& addr) { return addr.find(':') != std::string::npos; }

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string out;
  for (int32_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

}  // namespace

uint32_t next_generation(const std::string& job_id) {
  static std::mutex mu;
  static std::map<std::string, uint32_t> generations;
  std::lock_guard<std::mutex> lock(mu);
  return ++generations[job_id];
}

Status rendezvous_join(RendezvousRequest req, const MakeId& make_id, RendezvousResult* out) {
  const int rank = req.info.rank;
  const std::string who = cc::who(rank, req.info.host, req.info.pid);
  const std::string where = req.addr + ":" + std::to_string(req.port);
  std::string connect_addr = req.addr;
  if (rank == 0 && req.config.rendezvous != CC_RENDEZVOUS_EXTERNAL) {
    const bool v6 = is_ipv6_literal(req.addr);
    // The server lives as long as rank 0's communicator: it keeps the jobs'
    // keys for that long unless a job TTL was asked for.
    if (Status st =
            EmbeddedServerRef::acquire(v6 ? "::" : "0.0.0.0", req.port, req.config.token,
                                       &out->server, milliseconds(req.config.job_ttl_or(0)));
        !st.ok())
      return make_status(st.code, who + ": " + st.message);
    connect_addr = v6 ? "::1" : "127.0.0.1";  // our own server: no hairpin through NAT
  }
  rv::ClientOptions options;
  options.addr = connect_addr;
  options.port = req.port;
  options.job_id = req.config.job_id;
  options.token = req.config.token;
  options.client = "cc " CC_VERSION_STRING " comm";
  options.connect_timeout = remaining(req.deadline);
  options.request_timeout = std::min(milliseconds(req.config.timeout_ms), milliseconds(10000));
  out->connect_addr = connect_addr;
  if (Status st = rv::Client::connect(options, &out->client); !st.ok())
    return make_status(st.code, who + ": could not reach the rendezvous at " + where + " (job '" +
                                    req.config.job_id + "'): " + st.message);
  rv::Join join;
  if (rank == 0) {
    if (Status st = make_id(&join.unique_id); !st.ok()) return st;
  }
  out->generation = req.generation != 0 ? req.generation : next_generation(req.config.job_id);
  join.info = std::move(req.info);
  join.info.generation = out->generation;
  join.timeout_ms = static_cast<uint32_t>(remaining(req.deadline).count());
  rv::Joined joined;
  if (Status st = out->client->join(join, &joined); !st.ok())
    return make_status(st.code, who + ": joining communicator " + std::to_string(out->generation) +
                                    " of job '" + req.config.job_id + "' at " + where +
                                    " failed: " + st.message);
  out->unique_id = std::move(joined.unique_id);
  out->epoch = joined.epoch;
  out->rank = joined.rank;
  out->failed = std::move(joined.failed);
  if (out->epoch > 0)
    log().warn("{}: joined communicator {} of job '{}' as a replacement, in its generation {} "
               "(replacing ranks {}): take this rank's state from a survivor",
               who, out->generation, req.config.job_id, out->epoch, rank_list(out->failed));
  out->members = std::move(joined.members);
  // What the server wants every rank to know (a rank behind NAT, say).
  for (size_t start = 0; start < joined.notice.size();) {
    size_t end = joined.notice.find('\n', start);
    if (end == std::string::npos) end = joined.notice.size();
    log().warn("{}: {}", who, joined.notice.substr(start, end - start));
    start = end + 1;
  }
  return Status::success();
}

}  // namespace cc::comm
