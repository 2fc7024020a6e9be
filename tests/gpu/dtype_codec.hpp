// Host-side values of every cc datatype, fp16/bf16/fp8 included: encode a
// double into an element and decode it back, and the tolerance a check uses.
// The tests only use small values that every type holds exactly (for 2 ranks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cc/cc.h"

namespace cc::test {

size_t elem_size(cc_datatype_t t);
bool is_integer(cc_datatype_t t);
const char* type_name(cc_datatype_t t);
const char* op_name(cc_redop_t op);

void encode(cc_datatype_t t, void* base, size_t index, double value);
double decode(cc_datatype_t t, const void* base, size_t index);

// Whether `got` matches `expected` for type t: exact for integers, within the
// type's precision for floating point.
bool close_enough(cc_datatype_t t, double expected, double got);

}  // namespace cc::test
