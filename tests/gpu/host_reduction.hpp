// The all-reduce cc's kernels promise, computed on the host element by
// element: every rank's input combined in rank order 0..n-1 with the type's
// own arithmetic (integer sums and products wrap; half and bfloat16 compute
// in float and round to nearest even after every operation; an average
// multiplies each input by 1/n rounded to the type, then sums), so a check
// can ask for the very bits. The one freedom left to the compiler, fusing
// an average's multiply and add into one FMA for float and double, is
// accepted either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nccl.h>

namespace cc::test {

// Rank `rank`'s input of `count` elements: values that keep every op finite
// over 8 ranks (no NaN, no overflow of a floating type), with fractions
// that make rounding matter. The same arguments give the same bytes.
std::vector<uint8_t> make_input(ncclDataType_t type, ncclRedOp_t op, int rank, size_t count,
                                uint32_t seed);

// The reduction of `inputs` (one per rank, `count` elements each).
struct Expected {
  std::vector<uint8_t> plain;  // the operations one by one
  std::vector<uint8_t> fused;  // float and double averages with FMA (else = plain)
};
Expected reduce_on_host(ncclDataType_t type, ncclRedOp_t op,
                        const std::vector<std::vector<uint8_t>>& inputs, size_t count);

// "" when every element of `got` has the bits of `want.plain` or
// `want.fused`; else a message naming the first wrong element and how many are.
std::string compare(ncclDataType_t type, const Expected& want, const std::vector<uint8_t>& got,
                    size_t count);

}  // namespace cc::test
