// The gpu suite's host encoders for fp16, bf16 and fp8 agree with CUDA's own
// host conversions, and every value the suite uses survives a round trip.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "tests/gpu/dtype_codec.hpp"

using namespace cc::test;

namespace {
const double kValues[] = {0, 0.5, 1, 1.25, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 12, 16, 24, -1, -3};

template <class T>
uint32_t bits_of(T v) {
  uint32_t out = 0;
  std::memcpy(&out, &v, sizeof v);
  return out;
}
uint32_t encoded(cc_datatype_t t, double v) {
  uint8_t buf[8] = {};
  encode(t, buf, 0, v);
  uint32_t out = 0;
  std::memcpy(&out, buf, elem_size(t));
  return out;
}
}  // namespace

TEST_CASE("fp16, bf16 and fp8 encodings match CUDA's host conversions") {
  for (double v : kValues) {
    INFO("value " << v);
    const float f = static_cast<float>(v);
    CHECK(encoded(CC_FLOAT16, v) == bits_of(__half_raw(__float2half_rn(f)).x));
    CHECK(encoded(CC_BFLOAT16, v) == bits_of(__nv_bfloat16_raw(__float2bfloat16_rn(f)).x));
    CHECK(encoded(CC_FLOAT8_E4M3, v) == __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
    CHECK(encoded(CC_FLOAT8_E5M2, v) == __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2));
  }
}

TEST_CASE("every type round-trips the suite's values") {
  for (int t = 0; t < CC_NUM_DATATYPES; ++t) {
    const auto dt = static_cast<cc_datatype_t>(t);
    for (double v : kValues) {
      if (is_integer(dt) && (v != static_cast<long>(v) || (v < 0 && (t % 2 == 1)))) continue;
      INFO(type_name(dt) << " value " << v);
      std::vector<uint8_t> buf(elem_size(dt) * 3);
      encode(dt, buf.data(), 2, v);
      CHECK(decode(dt, buf.data(), 2) == v);
      CHECK(close_enough(dt, v, decode(dt, buf.data(), 2)));
    }
  }
  CHECK_FALSE(close_enough(CC_INT32, 3, 4));
  CHECK_FALSE(close_enough(CC_FLOAT8_E5M2, 4, 5));
  CHECK(close_enough(CC_FLOAT8_E5M2, 9, 8));  // e5m2 has 3 significant bits
}
