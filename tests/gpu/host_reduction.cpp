#include "tests/gpu/host_reduction.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "common/datatypes.hpp"

namespace cc::test {
namespace {

// ---- half and bfloat16 on the host, rounding to nearest even -------------------

struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float float_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m x 2^-24
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign != 0 ? -v : v;
  }
  if (e == 31) return float_of(sign | 0x7f800000u | (m << 13));
  return float_of(sign | ((e - 15 + 127) << 23) | (m << 13));
}

uint16_t float_to_half(float f) {
  const uint32_t x = bits_of(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (ax < 0x38800000u) {  // below 2^-14: a multiple of 2^-24, exact scaling, even rounding
    const float scaled = float_of(ax) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  const uint32_t m = ax & 0x7fffffu;
  uint32_t h = (((ax >> 23) - 127 + 15) << 10) | (m >> 13);
  const uint32_t rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;  // may carry into the exponent
  return static_cast<uint16_t>(sign | h);
}

float bf16_to_float(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bf16(float f) {
  const uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---- each type's arithmetic, as lib/fast/kernels.cu does it ----------------------

template <class T>
constexpr bool kNarrow = std::is_same_v<T, Half> || std::is_same_v<T, Bf16>;
template <class T>
using Wide = std::conditional_t<kNarrow<T>, float, T>;

template <class T>
Wide<T> widen(T v) {
  if constexpr (std::is_same_v<T, Half>)
    return half_to_float(v.bits);
  else if constexpr (std::is_same_v<T, Bf16>)
    return bf16_to_float(v.bits);
  else
    return v;
}
template <class T>
T narrow(Wide<T> v) {
  if constexpr (std::is_same_v<T, Half>)
    return Half{float_to_half(v)};
  else if constexpr (std::is_same_v<T, Bf16>)
    return Bf16{float_to_bf16(v)};
  else
    return v;
}

// Rounded to W before anything else happens to it (no contraction into an
// FMA by the host compiler).
template <class W>
W rounded(W v) {
  volatile W keep = v;
  return keep;
}

template <class T>
T combine(ncclRedOp_t op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (op == ncclSum) return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    if (op == ncclProd)
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    if (op == ncclMax) return a < b ? b : a;
    return b < a ? b : a;
  } else {
    const Wide<T> x = widen(a), y = widen(b);
    if (op == ncclSum || op == ncclAvg) return narrow<T>(rounded(x + y));
    if (op == ncclProd) return narrow<T>(rounded(x * y));
    if (op == ncclMax) return narrow<T>(x < y ? y : x);
    return narrow<T>(y < x ? y : x);
  }
}

template <class T>
T load(const std::vector<uint8_t>& v, size_t i) {
  T x;
  std::memcpy(&x, v.data() + i * sizeof(T), sizeof(T));
  return x;
}
template <class T>
void store(std::vector<uint8_t>& v, size_t i, T x) {
  std::memcpy(v.data() + i * sizeof(T), &x, sizeof(T));
}

template <class T>
Expected reduce_typed(ncclRedOp_t op, const std::vector<std::vector<uint8_t>>& inputs,
                      size_t count) {
  const int n = static_cast<int>(inputs.size());
  Expected out;
  out.plain.resize(count * sizeof(T));
  out.fused.resize(count * sizeof(T));
  if constexpr (std::is_integral_v<T>) {
    for (size_t i = 0; i < count; ++i) {
      T acc = load<T>(inputs[0], i);
      for (int r = 1; r < n; ++r)
        acc = combine<T>(op, acc, load<T>(inputs[static_cast<size_t>(r)], i));
      store(out.plain, i, acc);
    }
    out.fused = out.plain;
  } else {
    using W = Wide<T>;
    const T inv = narrow<T>(static_cast<W>(1.0 / n));
    for (size_t i = 0; i < count; ++i) {
      T acc{}, fused{};
      for (int r = 0; r < n; ++r) {
        const T v = load<T>(inputs[static_cast<size_t>(r)], i);
        if (op != ncclAvg) {
          acc = r == 0 ? v : combine<T>(op, acc, v);
          continue;
        }
        const T scaled = narrow<T>(rounded(widen(v) * widen(inv)));
        acc = r == 0 ? scaled : combine<T>(op, acc, scaled);
        if constexpr (!kNarrow<T>) fused = r == 0 ? scaled : std::fma(v, inv, fused);
      }
      store(out.plain, i, acc);
      store(out.fused, i, kNarrow<T> || op != ncclAvg ? acc : fused);
    }
  }
  return out;
}

// A small deterministic generator (splitmix64).
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

template <class T>
std::vector<uint8_t> input_typed(ncclRedOp_t op, size_t count, Random& rnd) {
  std::vector<uint8_t> out(count * sizeof(T));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t bits = rnd.next();
    T v;
    if constexpr (std::is_integral_v<T>) {
      std::memcpy(&v, &bits, sizeof(T));
    } else {
      double x;
      if (op == ncclProd) {  // magnitudes in [0.5, 2): 8 ranks stay well inside half's range
        x = 0.5 + 1.5 * static_cast<double>(bits & 0xfffffu) / 1048576.0;
        if ((bits >> 32) & 1u) x = -x;
      } else {  // [-4, 4) with 17 fraction bits: exact in float, rounded in half and bf16
        x = (static_cast<double>(bits & 0xfffffu) - 524288.0) / 131072.0;
      }
      v = narrow<T>(static_cast<Wide<T>>(x));
    }
    store(out, i, v);
  }
  return out;
}

template <class F>
auto by_type(ncclDataType_t type, F&& f) {
  switch (type) {
    case ncclInt8:
      return f(int8_t{});
    case ncclUint8:
      return f(uint8_t{});
    case ncclInt32:
      return f(int32_t{});
    case ncclUint32:
      return f(uint32_t{});
    case ncclInt64:
      return f(int64_t{});
    case ncclUint64:
      return f(uint64_t{});
    case ncclFloat16:
      return f(Half{});
    case ncclBfloat16:
      return f(Bf16{});
    case ncclFloat32:
      return f(float{});
    case ncclFloat64:
      return f(double{});
    default:
      throw std::invalid_argument("not a type of cc's kernels");
  }
}

template <class T>
double as_double(const std::vector<uint8_t>& v, size_t i) {
  return static_cast<double>(widen(load<T>(v, i)));
}

}  // namespace

std::vector<uint8_t> make_input(ncclDataType_t type, ncclRedOp_t op, int rank, size_t count,
                                uint32_t seed) {
  Random rnd{(static_cast<uint64_t>(seed) << 32) ^ (static_cast<uint64_t>(rank) << 16) ^
             (static_cast<uint64_t>(type) << 8) ^ static_cast<uint64_t>(op)};
  return by_type(type, [&](auto v) { return input_typed<decltype(v)>(op, count, rnd); });
}

Expected reduce_on_host(ncclDataType_t type, ncclRedOp_t op,
                        const std::vector<std::vector<uint8_t>>& inputs, size_t count) {
  return by_type(type, [&](auto v) { return reduce_typed<decltype(v)>(op, inputs, count); });
}

std::string compare(ncclDataType_t type, const Expected& want, const std::vector<uint8_t>& got,
                    size_t count) {
  const size_t es = datatype_size(static_cast<cc_datatype_t>(type));
  if (got.size() < count * es) return "the result is shorter than " + std::to_string(count);
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* g = got.data() + i * es;
    if (std::memcmp(g, want.plain.data() + i * es, es) == 0 ||
        std::memcmp(g, want.fused.data() + i * es, es) == 0)
      continue;
    if (wrong++ == 0) first = i;
  }
  if (wrong == 0) return "";
  std::ostringstream words;
  words.precision(17);
  words << wrong << " of " << count << " elements wrong; the first, element " << first << ", is "
        << by_type(type, [&](auto v) { return as_double<decltype(v)>(got, first); }) << " where "
        << by_type(type, [&](auto v) { return as_double<decltype(v)>(want.plain, first); })
        << " was expected";
  return words.str();
}

}  // namespace cc::test
