// The text helpers of the rendezvous server (see words.hpp), and Conn::who,
// which names the other end of a connection in log lines and errors.
#include "rendezvous/server_core/words.hpp"

#include "common/who.hpp"
#include "common/printable.hpp"
#include "rendezvous/server_core/state.hpp"

namespace cc::rv::server_core {

std::string peer_address(const std::string& peer) {
  if (!peer.empty() && peer.front() == '[') {
    const size_t end = peer.find(']');
    return end == std::string::npos ? peer : peer.substr(1, end - 1);
  }
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

bool is_loopback(const std::string& addr) { return addr.rfind("127.", 0) == 0 || addr == "::1"; }

// "rank 3 (host a, pid 42) at 10.0.0.3:5555" once it joined, "host a (pid 42)
// at 10.0.0.3:5555" after its hello, "10.0.0.3:5555" before.
std::string Conn::who() const {
  if (!memberships.empty()) {
    const Membership& m = memberships.back();
    return cc::who(m.rank, m.host, m.pid) + " at " + peer;
  }
  if (phase == Phase::ready) return cc::who(-1, hello.host, hello.pid) + " at " + peer;
  return peer;
}

std::string quote(const std::string& s) { return "'" + printable(s) + "'"; }

std::string member_who(const MemberInfo& i) { return cc::who(i.rank, i.host, i.pid); }

std::string nccl_text(int32_t code) {
  if (code <= 0) return "unknown";
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

std::string rank_ranges(const std::vector<int32_t>& ranks) {
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

namespace {
constexpr size_t kShown = 16;  // names in one message, then "and N more"
}  // namespace

std::string named_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kShown) out += " and " + std::to_string(names.size() - kShown) + " more";
  return out;
}

std::string key_list(const std::vector<std::string>& keys) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) shown.push_back(quote(keys[i]));
  std::string out = named_list(shown);
  if (keys.size() > shown.size())
    out += " and " + std::to_string(keys.size() - shown.size()) + " more";
  return out;
}

const char* recover_call_name(RecoverKind k) {
  return k == RecoverKind::shrink ? "cc_comm_shrink" : "cc_comm_regrow";
}

std::string recover_call_words(RecoverKind k, int32_t nranks) {
  return k == RecoverKind::shrink ? "cc_comm_shrink"
                                  : "cc_comm_regrow(nranks=" + std::to_string(nranks) + ")";
}

std::string lineage_where(const std::string& job, uint32_t g, uint32_t epoch) {
  return "job " + quote(job) + ", communicator " + std::to_string(g) + ", generation " +
         std::to_string(epoch);
}

// A rank whose connection arrives from another address than the one it says
// NCCL will use sits behind NAT (a Docker bridge, say): the others will try
// an address they may not reach. Loopback connections are the server's own
// host and prove nothing.
std::string nat_notice(const MemberInfo& in, const std::string& peer) {
  const std::string from = peer_address(peer);
  if (in.nccl_addr.empty() || from.empty() || is_loopback(from) || from == in.nccl_addr) return {};
  const std::string nccl_addr = printable(in.nccl_addr);
  return member_who(in) + " will have NCCL use the address " + nccl_addr +
         ", but its connection to the rendezvous came from " + from +
         ": a NAT or a Docker bridge sits between them, and the other ranks may not reach " +
         nccl_addr +
         ". Run the containers with --network host, or set NCCL_SOCKET_IFNAME to an "
         "interface the other hosts can reach";
}

std::string recovery_missing_words(const std::vector<std::string>& silent, RecoverKind kind,
                                   const std::vector<int32_t>& holes,
                                   const std::string& settings) {
  std::string parts;
  if (!silent.empty())
    parts += named_list(silent) +
             (silent.size() == 1 ? " is alive but did not call " : " are alive but did not call ") +
             recover_call_name(kind);
  if (!holes.empty())
    parts += std::string(parts.empty() ? "" : "; ") + (holes.size() == 1 ? "rank " : "ranks ") +
             rank_ranges(holes) + " never came: no replacement joined for " +
             (holes.size() == 1 ? "it" : "them") +
             "; start a process with RANK=" + std::to_string(holes.front()) +
             (holes.size() == 1 ? "" : " (and the others)") + " and the job's " + settings +
             " (cc-run --max-restarts does)";
  return parts;
}

}  // namespace cc::rv::server_core
