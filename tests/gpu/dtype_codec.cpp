#include "tests/gpu/dtype_codec.hpp"

#include <cmath>
#include <cstring>

#include "common/datatypes.hpp"

namespace cc::test {
namespace {

// An IEEE-style binary float of `ebits` exponent and `mbits` mantissa bits.
uint32_t encode_minifloat(double x, int ebits, int mbits) {
  const int bias = (1 << (ebits - 1)) - 1;
  uint32_t sign = 0;
  if (std::signbit(x)) {
    sign = 1u << (ebits + mbits);
    x = -x;
  }
  if (x == 0) return sign;
  int k = 0;
  const double f = std::frexp(x, &k);  // x = f * 2^k, f in [0.5, 1)
  int e = k - 1 + bias;
  uint32_t m;
  if (e <= 0) {  // subnormal
    m = static_cast<uint32_t>(std::lround(std::ldexp(x, bias - 1 + mbits)));
    e = 0;
  } else {
    m = static_cast<uint32_t>(std::lround((2 * f - 1) * (1 << mbits)));
    if (m == (1u << mbits)) {
      m = 0;
      ++e;
    }
  }
  return sign | (static_cast<uint32_t>(e) << mbits) | m;
}

double decode_minifloat(uint32_t bits, int ebits, int mbits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const bool neg = (bits >> (ebits + mbits)) & 1u;
  const int e = static_cast<int>((bits >> mbits) & ((1u << ebits) - 1));
  const double m = bits & ((1u << mbits) - 1);
  double v = e == 0 ? std::ldexp(m, 1 - bias - mbits) : std::ldexp(1 + m / (1 << mbits), e - bias);
  return neg ? -v : v;
}

template <class T>
void put(void* base, size_t i, T v) {
  std::memcpy(static_cast<char*>(base) + i * sizeof(T), &v, sizeof(T));
}
template <class T>
T get(const void* base, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

size_t elem_size(cc_datatype_t t) { return cc::datatype_size(t); }

bool is_integer(cc_datatype_t t) { return t <= CC_UINT64; }

const char* type_name(cc_datatype_t t) {
  static const char* names[] = {"int8",    "uint8",    "int32",       "uint32",
                                "int64",   "uint64",   "float16",     "float32",
                                "float64", "bfloat16", "float8_e4m3", "float8_e5m2"};
  return static_cast<int>(t) >= 0 && t < CC_NUM_DATATYPES ? names[t] : "unknown";
}

const char* op_name(cc_redop_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return static_cast<int>(op) >= 0 && op < CC_NUM_REDOPS ? names[op] : "unknown";
}

void encode(cc_datatype_t t, void* base, size_t i, double v) {
  switch (t) {
    case CC_INT8:
      put<int8_t>(base, i, static_cast<int8_t>(v));
      break;
    case CC_UINT8:
      put<uint8_t>(base, i, static_cast<uint8_t>(v));
      break;
    case CC_INT32:
      put<int32_t>(base, i, static_cast<int32_t>(v));
      break;
    case CC_UINT32:
      put<uint32_t>(base, i, static_cast<uint32_t>(v));
      break;
    case CC_INT64:
      put<int64_t>(base, i, static_cast<int64_t>(v));
      break;
    case CC_UINT64:
      put<uint64_t>(base, i, static_cast<uint64_t>(v));
      break;
    case CC_FLOAT32:
      put<float>(base, i, static_cast<float>(v));
      break;
    case CC_FLOAT64:
      put<double>(base, i, v);
      break;
    case CC_FLOAT16:
      put<uint16_t>(base, i, static_cast<uint16_t>(encode_minifloat(v, 5, 10)));
      break;
    case CC_BFLOAT16:
      put<uint16_t>(base, i, static_cast<uint16_t>(encode_minifloat(v, 8, 7)));
      break;
    case CC_FLOAT8_E4M3:
      put<uint8_t>(base, i, static_cast<uint8_t>(encode_minifloat(v, 4, 3)));
      break;
    case CC_FLOAT8_E5M2:
      put<uint8_t>(base, i, static_cast<uint8_t>(encode_minifloat(v, 5, 2)));
      break;
    default:
      break;
  }
}

double decode(cc_datatype_t t, const void* base, size_t i) {
  switch (t) {
    case CC_INT8:
      return get<int8_t>(base, i);
    case CC_UINT8:
      return get<uint8_t>(base, i);
    case CC_INT32:
      return get<int32_t>(base, i);
    case CC_UINT32:
      return get<uint32_t>(base, i);
    case CC_INT64:
      return static_cast<double>(get<int64_t>(base, i));
    case CC_UINT64:
      return static_cast<double>(get<uint64_t>(base, i));
    case CC_FLOAT32:
      return get<float>(base, i);
    case CC_FLOAT64:
      return get<double>(base, i);
    case CC_FLOAT16:
      return decode_minifloat(get<uint16_t>(base, i), 5, 10);
    case CC_BFLOAT16:
      return decode_minifloat(get<uint16_t>(base, i), 8, 7);
    case CC_FLOAT8_E4M3:
      return decode_minifloat(get<uint8_t>(base, i), 4, 3);
    case CC_FLOAT8_E5M2:
      return decode_minifloat(get<uint8_t>(base, i), 5, 2);
    default:
      return std::nan("");
  }
}

bool close_enough(cc_datatype_t t, double expected, double got) {
  if (is_integer(t)) return expected == got;
  double rel = 1e-5;
  switch (t) {
    case CC_FLOAT64:
      rel = 1e-12;
      break;
    case CC_FLOAT16:
      rel = 1e-3;
      break;
    case CC_BFLOAT16:
      rel = 8e-3;
      break;
    case CC_FLOAT8_E4M3:
      rel = 0.07;
      break;
    case CC_FLOAT8_E5M2:
      rel = 0.13;
      break;
    default:
      break;
  }
  return std::fabs(got - expected) <= 1e-6 + rel * std::fabs(expected);
}

}  // namespace cc::test
