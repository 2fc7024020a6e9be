#include "common/call_desc.hpp"

#include <cstring>

#include "cc/cc.h"
#include "common/datatypes.hpp"
#include "common/enum_names.hpp"

namespace cc {
namespace {

// splitmix64's finaliser: every input bit moves every output bit.
uint64_t mix(uint64_t h, uint64_t v) {
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// "FLOAT32" from "CC_FLOAT32".
const char* short_name(const char* name) {
  return std::strncmp(name, "CC_", 3) == 0 ? name + 3 : name;
}

}  // namespace

bool same_call(const CallDesc& a, const CallDesc& b) {
  return a.kind == b.kind && a.count == b.count && a.dtype == b.dtype && a.op == b.op &&
         a.root == b.root;
}

constexpr std::array kCallNames{"cc_allreduce", "cc_broadcast",     "cc_reduce",
                                "cc_allgather", "cc_reducescatter", "cc_alltoall",
                                "cc_send",      "cc_recv",          "cc_barrier"};

const char* call_name(CallKind kind) {
  return enum_name<CallKind::allreduce, CallKind::barrier>(kCallNames, kind, "an unknown call");
}

std::string call_words(const CallDesc& call) {
  std::string out = call_name(call.kind);
  if (call.kind == CallKind::barrier) return out;
  out += " " + std::to_string(call.count) + " x " +
         short_name(datatype_name(static_cast<cc_datatype_t>(call.dtype)));
  if (call.op >= 0)
    out += std::string(" ") + short_name(redop_name(static_cast<cc_redop_t>(call.op)));
  if (call.kind == CallKind::send) return out + " to rank " + std::to_string(call.root);
  if (call.kind == CallKind::recv) return out + " from rank " + std::to_string(call.root);
  if (call.root >= 0) out += " root " + std::to_string(call.root);
  if (call.in_place) out += " in place";
  return out;
}

uint64_t fingerprint_step(uint64_t before, const CallDesc& call) {
  uint64_t h = mix(before, static_cast<uint64_t>(call.kind));
  h = mix(h, call.count);
  h = mix(h, static_cast<uint32_t>(call.dtype) |
                 (static_cast<uint64_t>(static_cast<uint32_t>(call.op)) << 32));
  return mix(h, static_cast<uint32_t>(call.root));
}

std::string graph_words(const CallPoint& replay) {
  const std::string calls = replay.peer == 1 ? "1 call" : std::to_string(replay.peer) + " calls";
  return "a graph of " + calls + " (the first " + call_words(replay.call) + ")";
}

uint64_t fingerprint_fold(uint64_t before, uint64_t value) { return mix(before, value); }

bool pair_matches(const CallDesc& send, const CallDesc& recv) {
  return send.count == recv.count && send.dtype == recv.dtype;
}

CallDesc pair_part(const CallDesc& call) {
  CallDesc part;
  part.kind = CallKind::send;
  part.count = call.count;
  part.dtype = call.dtype;
  return part;
}

}  // namespace cc
