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

// How one datatype's elements are written and read, and how close a
// floating-point result must come (integers must match exactly).
struct Codec {
  cc_datatype_t type;
  void (*encode)(void* base, size_t i, double v);
  double (*decode)(const void* base, size_t i);
  double rel;
};

template <class T>
constexpr Codec native(cc_datatype_t t, double rel = 0) {
  return {t, [](void* base, size_t i, double v) { put<T>(base, i, static_cast<T>(v)); },
          [](const void* base, size_t i) { return static_cast<double>(get<T>(base, i)); }, rel};
}

// A float of `ebits` exponent and `mbits` mantissa bits, stored in a Bits.
template <class Bits, int ebits, int mbits>
constexpr Codec minifloat(cc_datatype_t t, double rel) {
  return {
      t,
      [](void* base, size_t i, double v) {
        put<Bits>(base, i, static_cast<Bits>(encode_minifloat(v, ebits, mbits)));
      },
      [](const void* base, size_t i) { return decode_minifloat(get<Bits>(base, i), ebits, mbits); },
      rel};
}

constexpr Codec kCodecs[] = {
    native<int8_t>(CC_INT8),
    native<uint8_t>(CC_UINT8),
    native<int32_t>(CC_INT32),
    native<uint32_t>(CC_UINT32),
    native<int64_t>(CC_INT64),
    native<uint64_t>(CC_UINT64),
    native<float>(CC_FLOAT32, 1e-5),
    native<double>(CC_FLOAT64, 1e-12),
    minifloat<uint16_t, 5, 10>(CC_FLOAT16, 1e-3),
    minifloat<uint16_t, 8, 7>(CC_BFLOAT16, 8e-3),
    minifloat<uint8_t, 4, 3>(CC_FLOAT8_E4M3, 0.07),
    minifloat<uint8_t, 5, 2>(CC_FLOAT8_E5M2, 0.13),
};

const Codec* codec_of(cc_datatype_t t) {
  for (const Codec& c : kCodecs)
    if (c.type == t) return &c;
  return nullptr;
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
  if (const Codec* c = codec_of(t)) c->encode(base, i, v);
}

double decode(cc_datatype_t t, const void* base, size_t i) {
  const Codec* c = codec_of(t);
  return c ? c->decode(base, i) : std::nan("");
}

bool close_enough(cc_datatype_t t, double expected, double got) {
  if (is_integer(t)) return expected == got;
  const Codec* c = codec_of(t);
  const double rel = c ? c->rel : 1e-5;
  return std::fabs(got - expected) <= 1e-6 + rel * std::fabs(expected);
}

}  // namespace cc::test
