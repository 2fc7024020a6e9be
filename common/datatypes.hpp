// Facts about cc's datatypes and reduction operations, for checks and messages.
#pragma once

#include <cstddef>

#include "cc/cc.h"

namespace cc {

// Bytes of one element; 0 for a value outside cc_datatype_t.
size_t datatype_size(cc_datatype_t dtype);
const char* datatype_name(cc_datatype_t dtype);  // "CC_FLOAT32", or "unknown"
const char* redop_name(cc_redop_t op);           // "CC_SUM", or "unknown"

// One step of `op` on two values as doubles: the reference arithmetic of
// tests and cc-bench's checks. CC_AVG sums (the caller divides at the end);
// a value outside cc_redop_t returns `acc`.
double reduce_step(cc_redop_t op, double acc, double value);

}  // namespace cc
