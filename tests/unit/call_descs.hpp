// The calls the call-check tests make (test_call_check.cpp,
// test_call_ends.cpp), as CallDescs: float32 and SUM unless asked.
#pragma once

#include <cstdint>

#include "cc/cc.h"
#include "common/call_desc.hpp"

namespace cc::test {

inline CallDesc allreduce(uint64_t count, int dtype = CC_FLOAT32, int op = CC_SUM) {
  return {CallKind::allreduce, count, dtype, op, -1, false};
}
inline CallDesc allgather(uint64_t count, int dtype = CC_FLOAT32) {
  return {CallKind::allgather, count, dtype, -1, -1, false};
}
inline CallDesc broadcast(uint64_t count, int root, int dtype = CC_FLOAT32) {
  return {CallKind::broadcast, count, dtype, -1, root, false};
}
inline CallDesc reduce(uint64_t count, int root, int op = CC_SUM) {
  return {CallKind::reduce, count, CC_FLOAT32, op, root, false};
}
inline CallDesc barrier() { return {}; }
inline CallDesc send(uint64_t count, int peer, int dtype = CC_FLOAT32) {
  return {CallKind::send, count, dtype, -1, peer, false};
}
inline CallDesc recv(uint64_t count, int peer, int dtype = CC_FLOAT32) {
  return {CallKind::recv, count, dtype, -1, peer, false};
}

}  // namespace cc::test
