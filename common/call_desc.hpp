// One call of a communicator as every rank must make it: its kind, count,
// datatype, op, root (or peer) and whether it runs in place. The running
// fingerprint of a communicator's calls (lib/core/call_log.hpp) hashes these,
// the rendezvous compares them across ranks (rendezvous/rules/call_check.hpp)
// and every word about a call that differs comes from call_words().
#pragma once

#include <cstdint>
#include <string>

namespace cc {

// The kinds of call, as the entry points describe themselves (lib/comm/collective.hpp).
enum class CallKind : uint8_t {
  allreduce,
  broadcast,
  reduce,
  allgather,
  reducescatter,
  alltoall,
  send,
  recv,
  barrier
};
inline constexpr uint8_t kLastCallKind = static_cast<uint8_t>(CallKind::barrier);

struct CallDesc {
  CallKind kind = CallKind::barrier;
  uint64_t count = 0;     // as the entry point names it: count, sendcount or recvcount
  int32_t dtype = 0;      // a cc_datatype_t
  int32_t op = -1;        // a cc_redop_t for the kinds that reduce; -1 otherwise
  int32_t root = -1;      // broadcast, reduce: the root; send, recv: the peer; -1 otherwise
  bool in_place = false;  // described, not compared (fingerprint_step)
};

// Equal in everything the fingerprint covers.
bool same_call(const CallDesc& a, const CallDesc& b);

// "cc_allreduce"
const char* call_name(CallKind kind);
// "cc_allreduce 16777216 x FLOAT32 SUM", "cc_broadcast 4 x INT8 root 0 in place",
// "cc_send 8 x FLOAT32 to rank 1", "cc_barrier".
std::string call_words(const CallDesc& call);

// The running fingerprint after `call`, given the one before it: what the
// ranks must agree on folded into 64 bits. Everything in CallDesc but
// in_place, which ranks may choose each for itself (and which an in-place
// all-gather spells differently on every rank).
uint64_t fingerprint_step(uint64_t before, const CallDesc& call);
// The running fingerprint after folding in `value` (a graph's fingerprint
// on the replay line).
uint64_t fingerprint_fold(uint64_t before, uint64_t value);

// Whether a's send and b's matching recv agree: count and datatype.
bool pair_matches(const CallDesc& send, const CallDesc& recv);
// What a send or recv contributes to the fingerprint of its pair (a -> b):
// count and datatype, the same on both sides.
CallDesc pair_part(const CallDesc& call);

// A point of one rank's calls where another rank can be compared with it.
// Collectives form one line per communicator, numbered 1, 2, ...; sends and
// recvs form one line per ordered pair of ranks (from -> to), numbered by the
// k-th send from `from` to `to`, which is the k-th recv of `to` from `from`.
// Replays of CUDA graphs that captured the communicator's calls form a line
// of their own, numbered by replay: its running fingerprint folds in each
// replayed graph's fingerprint of its calls, `call` is the graph's first
// call and `peer` the number of its calls.
struct CallPoint {
  enum class Line : uint8_t { collective = 0, send = 1, recv = 2, replay = 3 };
  Line line = Line::collective;
  int32_t peer = -1;  // send: the receiver; recv: the sender; replay: the graph's calls; else -1
  uint64_t seq = 0;          // its number on its line
  uint64_t fingerprint = 0;  // the line's running fingerprint after this call
  CallDesc call{};
};

// "a graph of 3 calls (the first cc_allreduce 8 x FLOAT32 SUM)": a replay
// point's graph, as text.
std::string graph_words(const CallPoint& replay);

}  // namespace cc
