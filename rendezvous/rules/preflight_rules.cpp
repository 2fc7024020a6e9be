// The reachability test's rule (see preflight_rules.hpp): the plan, the
// verdict and their messages.
#include "rendezvous/rules/preflight_rules.hpp"

#include <cerrno>
#include <unordered_map>

#include "common/who.hpp"
#include "rendezvous/rules/words.hpp"

namespace cc::rv::rules {
namespace {

// A failed connection: result->rank is the target.
struct FailedProbe {
  int32_t from = -1;
  const ProbeResult* result = nullptr;
};

constexpr size_t kOthersShown = 3;

// One end of a failed connection, as the server knows it.
struct End {
  int32_t rank = -1;
  std::string who;   // "rank 1 (host b, pid 7)"
  std::string name;  // "rank 1"
  std::string host;  // "host b", or "rank 1's host" when the name is unknown
  const PreflightReady* e = nullptr;
  std::string peer;  // the address its rendezvous connection came from
};

End end_of(const std::vector<PreflightFacts>& members, int32_t rank) {
  End end;
  end.rank = rank;
  const PreflightFacts& m = members[static_cast<size_t>(rank)];
  end.who = member_who(m.info);
  end.name = cc::who(rank, {});
  end.host = m.info.host.empty() ? cc::who(rank, {}) + "'s host" : "host " + m.info.host;
  end.e = &m.ready;
  end.peer = m.peer;
  return end;
}

std::string address(const PreflightReady& e) {
  const bool v6 = e.addr.find(':') != std::string::npos;
  return (v6 ? "[" + e.addr + "]" : e.addr) + ":" + std::to_string(e.port);
}

// Whether `from` reached `to` in its own test; 0 unknown, 1 yes, -1 no.
int reached(const std::vector<PreflightFacts>& members, int32_t from, int32_t to) {
  for (const ProbeResult& r : members[static_cast<size_t>(from)].results)
    if (r.rank == to) return r.reached ? 1 : -1;
  return 0;
}

std::string interface_words(const PreflightReady& t) {
  if (!t.user_ifname.empty())
    return "interface " + t.ifname + ", from NCCL_SOCKET_IFNAME=" + t.user_ifname + " set by hand";
  if (!t.route_ifname.empty() && t.route_ifname == t.ifname)
    return "interface " + t.ifname + ", chosen by cc: the route to the rendezvous leaves there";
  return "interface " + t.ifname + ", NCCL's own choice";
}

std::string route_hint(const PreflightReady& t) {
  if (t.route_ifname.empty() || t.route_ifname == t.ifname) return "";
  return " (its route to the rendezvous leaves through " + t.route_ifname + ", " + t.route_addr +
         ")";
}

std::string firewall_fix(const End& s, const End& t) {
  return "Fix: allow incoming TCP from the job's other hosts on " + t.host +
         " (NCCL listens on ephemeral ports: allow the hosts' addresses, not single ports; e.g. "
         "'iptables -I INPUT -p tcp -s " +
         s.e->addr + " -j ACCEPT' or 'nft insert rule inet filter input ip saddr " + s.e->addr +
         " accept'), and check the routes both ways ('ip route get " + t.e->addr + "' on " +
         s.host + ", 'ip route get " + s.e->addr + "' on " + t.host + ")";
}

// "Likely cause: ... Fix: ..." for one failed connection.
std::string cause_and_fix(const std::vector<PreflightFacts>& members, const End& s, const End& t,
                          const ProbeResult& r) {
  const PreflightReady& te = *t.e;
  if (is_loopback(te.addr))
    return "Likely cause: NCCL will use the loopback address " + te.addr + " on " + t.host +
           ", which no other host reaches. Fix: set NCCL_SOCKET_IFNAME on " + t.host +
           " to an interface the other hosts reach" + route_hint(te);
  if (!te.user_ifname.empty() && !te.route_ifname.empty() && te.ifname != te.route_ifname)
    return "Likely cause: NCCL_SOCKET_IFNAME=" + te.user_ifname + " was set by hand on " + t.host +
           ", so NCCL uses " + te.ifname + " (" + te.addr + "), but the route from " + t.host +
           " to the rendezvous leaves through " + te.route_ifname + " (" + te.route_addr +
           "): " + te.ifname + " does not lead to " + s.host +
           ". Fix: set NCCL_SOCKET_IFNAME=" + te.route_ifname + " on " + t.host +
           ", or unset it there so cc picks the interface that reaches the rendezvous";
  if (!t.peer.empty() && !is_loopback(t.peer) && !te.route_addr.empty() && t.peer != te.route_addr)
    return "Likely cause: a NAT (a Docker bridge network, say) sits between " + t.host +
           " and the other hosts: the connection of " + t.name +
           " to the rendezvous arrived from " + t.peer + ", but its own address is " +
           te.route_addr + ", so " + te.addr +
           " cannot be reached from outside. Fix: run the container of " + t.name +
           " with --network host (or on a network the other hosts route to), or set "
           "NCCL_SOCKET_IFNAME on " +
           t.host +
           " to an interface whose address the other hosts reach; forwarding single ports does "
           "not help, NCCL listens on ephemeral ports";
  const std::string by_hand =
      te.user_ifname.empty() ? "" : " (NCCL_SOCKET_IFNAME=" + te.user_ifname + " set by hand)";
  const int back = reached(members, t.rank, s.rank);
  const std::string one_way = back > 0 ? "; " + t.name + " did connect to " + s.name +
                                             ", so the other way works and the block is one-way"
                                       : "";
  if (r.error == ENETUNREACH || r.error == EHOSTUNREACH)
    return "Likely cause: " + s.host + " has no route to " + te.addr + by_hand +
           ": it is an address of a network only " + t.host +
           " sees (a container bridge, a management or storage network)" + one_way +
           ". Fix: set NCCL_SOCKET_IFNAME on " + t.host +
           " to an interface on a network both hosts share, or add the missing route on " + s.host;
  if (r.error == ECONNREFUSED)
    return "Likely cause: the connection was refused although the test listened there: a " +
           std::string("firewall on ") + t.host + " or between the hosts rejects it" + one_way +
           ". " + firewall_fix(s, t);
  if (r.error == ETIMEDOUT || r.error == 0 || r.error == EAGAIN) {
    if (r.error == 0 && r.words.find("answered as") != std::string::npos)
      return "Likely cause: something other than " + t.name + " answers at " + address(te) +
             " (a port forward or NAT leading elsewhere). Fix: give NCCL an address that leads "
             "to " +
             t.host + " itself (NCCL_SOCKET_IFNAME)";
    return "Likely cause: nothing answered: a firewall drops TCP connections into " + t.host +
           " from " + s.host + ", or a route exists one way only" + one_way + ". " +
           firewall_fix(s, t);
  }
  return "Likely cause: the network between " + s.host + " and " + t.host + by_hand +
         " refuses this connection" + one_way + ". " + firewall_fix(s, t);
}

std::string failure_line(const End& s, const End& t, const ProbeResult& r) {
  return s.who + " cannot connect to " + t.who + " at " + address(*t.e) +
         ", the address NCCL will use for it (" + interface_words(*t.e) + "): " + r.words;
}

std::string failure_words(const std::vector<PreflightFacts>& members,
                          const std::vector<FailedProbe>& failed) {
  std::string out = "the reachability test before NCCL's init failed";
  if (failed.empty()) return out;
  if (failed.size() > 1)
    out += " (" + std::to_string(failed.size()) + " of the connections NCCL needs cannot be made)";
  out += ", so NCCL would hang or fail there: ";
  const FailedProbe& first = failed.front();
  const End s = end_of(members, first.from);
  const End t = end_of(members, first.result->rank);
  out +=
      failure_line(s, t, *first.result) + ". " + cause_and_fix(members, s, t, *first.result) + ".";
  for (size_t i = 1; i < failed.size() && i <= kOthersShown; ++i) {
    const End so = end_of(members, failed[i].from);
    const End to = end_of(members, failed[i].result->rank);
    out += (i == 1 ? " Also: " : "; ") + so.who + " to " + to.who + " at " + address(*to.e) + ": " +
           failed[i].result->words;
  }
  if (failed.size() > kOthersShown + 1)
    out += "; and " + std::to_string(failed.size() - kOthersShown - 1) + " more";
  if (failed.size() > 1) out += ".";
  out += " (CC_PREFLIGHT=0 skips this test.)";
  return out;
}

}  // namespace

std::vector<std::vector<ProbeTarget>> preflight_targets(
    const std::vector<PreflightFacts>& members) {
  const int32_t n = static_cast<int32_t>(members.size());
  auto ready = [&](int32_t r) -> const PreflightReady& {
    return members[static_cast<size_t>(r)].ready;
  };
  // The lowest rank of each host tests the root, unless its successor is the root.
  std::unordered_map<std::string, int32_t> first_of_host;
  first_of_host.reserve(members.size());
  for (int32_t r = 0; r < n; ++r) first_of_host.try_emplace(ready(r).host_key, r);
  auto target = [&](int32_t t) {
    const PreflightFacts& m = members[static_cast<size_t>(t)];
    return ProbeTarget{t, m.info.host, m.info.pid, m.ready.addr, m.ready.port};
  };
  auto testable = [&](int32_t from, int32_t to) {
    return from != to && ready(from).host_key != ready(to).host_key && ready(to).port != 0;
  };
  std::vector<std::vector<ProbeTarget>> targets(members.size());
  for (int32_t r = 0; r < n; ++r) {
    std::vector<ProbeTarget>& mine = targets[static_cast<size_t>(r)];
    const int32_t next = (r + 1) % n;
    if (testable(r, next)) mine.push_back(target(next));
    if (next != 0 && first_of_host.at(ready(r).host_key) == r && testable(r, 0))
      mine.push_back(target(0));
  }
  return targets;
}

PreflightVerdict preflight_verdict(const std::vector<PreflightFacts>& members) {
  const int32_t n = static_cast<int32_t>(members.size());
  PreflightVerdict v;
  std::vector<FailedProbe> failed;
  for (int32_t r = 0; r < n; ++r) {
    const PreflightFacts& m = members[static_cast<size_t>(r)];
    if (!m.reported) v.silent.push_back(r);
    for (const ProbeResult& result : m.results) {
      if (result.rank < 0 || result.rank >= n) continue;
      ++v.tested;
      if (!result.reached) failed.push_back({r, &result});
    }
  }
  if (!failed.empty()) {
    v.passed = false;
    v.words = failure_words(members, failed);
  }
  return v;
}

std::string preflight_disabled_words(const MemberInfo& off, const std::string& where) {
  return member_who(off) + " runs with CC_PREFLIGHT=0, so " + where +
         " skips the reachability test before NCCL's init";
}

std::string preflight_missing_words(const std::vector<int32_t>& missing, const std::string& where,
                                    uint32_t timeout_ms) {
  return std::string(missing.size() == 1 ? "rank " : "ranks ") + rank_ranges(missing) + " of " +
         where + " did not take part in the reachability test within " +
         std::to_string(timeout_ms) + " ms (a cc without it?), so NCCL's init starts untested";
}

std::string preflight_member_failed_words(PeerEventKind kind, const std::string& who,
                                          const std::string& reason) {
  if (kind == PeerEventKind::init_failed) return who + " could not start: " + reason;
  if (kind == PeerEventKind::aborted) return who + " aborted during init: " + reason;
  return who + " was lost during init: " + reason +
         ". It crashed, was killed or lost its network: look at its output";
}

}  // namespace cc::rv::rules
