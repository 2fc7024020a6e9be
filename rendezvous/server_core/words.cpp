// The text helpers only the rendezvous server uses (see words.hpp), and
// Conn::who, which names the other end of a connection in log lines and
// errors.
#include "rendezvous/server_core/words.hpp"

#include "common/printable.hpp"
#include "common/who.hpp"
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

}  // namespace cc::rv::server_core
