#include "rendezvous/server_core/preflight_words.hpp"

#include <cerrno>

#include "common/who.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv::server_core {
namespace {

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

End end_of(const CommJoin& gen, int32_t rank) {
  End end;
  end.rank = rank;
  const MemberInfo& info = gen.slots.at(rank).info;
  end.who = member_who(info);
  end.name = cc::who(rank, {});
  end.host = info.host.empty() ? cc::who(rank, {}) + "'s host" : "host " + info.host;
  const PreflightMember& m = gen.preflight.members[static_cast<size_t>(rank)];
  end.e = &m.endpoint;
  end.peer = m.peer;
  return end;
}

std::string address(const PreflightReady& e) {
  const bool v6 = e.addr.find(':') != std::string::npos;
  return (v6 ? "[" + e.addr + "]" : e.addr) + ":" + std::to_string(e.port);
}

// Whether `from` reached `to` in its own test; 0 unknown, 1 yes, -1 no.
int reached(const CommJoin& gen, int32_t from, int32_t to) {
  for (const ProbeResult& r : gen.preflight.members[static_cast<size_t>(from)].results)
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
std::string cause_and_fix(const CommJoin& gen, const End& s, const End& t, const ProbeResult& r) {
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
  const int back = reached(gen, t.rank, s.rank);
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

}  // namespace

std::string preflight_failure_words(const CommJoin& gen, const std::vector<FailedProbe>& failed) {
  std::string out = "the reachability test before NCCL's init failed";
  if (failed.empty()) return out;
  if (failed.size() > 1)
    out += " (" + std::to_string(failed.size()) + " of the connections NCCL needs cannot be made)";
  out += ", so NCCL would hang or fail there: ";
  const FailedProbe& first = failed.front();
  const End s = end_of(gen, first.from);
  const End t = end_of(gen, first.result->rank);
  out += failure_line(s, t, *first.result) + ". " + cause_and_fix(gen, s, t, *first.result) + ".";
  for (size_t i = 1; i < failed.size() && i <= kOthersShown; ++i) {
    const End so = end_of(gen, failed[i].from);
    const End to = end_of(gen, failed[i].result->rank);
    out += (i == 1 ? " Also: " : "; ") + so.who + " to " + to.who + " at " + address(*to.e) + ": " +
           failed[i].result->words;
  }
  if (failed.size() > kOthersShown + 1)
    out += "; and " + std::to_string(failed.size() - kOthersShown - 1) + " more";
  if (failed.size() > 1) out += ".";
  out += " (CC_PREFLIGHT=0 skips this test.)";
  return out;
}

}  // namespace cc::rv::server_core
