#include "tools/cc-bench/bench_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "common/datatypes.hpp"

namespace cc::tools::bench {
namespace {

struct MiniFloat {
  int ebits, mbits, bias;
  bool ieee;  // all-ones exponent is inf/NaN (false: float8 e4m3fn, NaN only at S.1111.111)
};
constexpr MiniFloat kHalf{5, 10, 15, true};
constexpr MiniFloat kBf16{8, 7, 127, true};
constexpr MiniFloat kE4m3{4, 3, 7, false};
constexpr MiniFloat kE5m2{5, 2, 15, true};

uint32_t encode_mini(const MiniFloat& f, double v) {
  const uint32_t sign = std::signbit(v) ? 1u << (f.ebits + f.mbits) : 0u;
  const uint32_t exp_all = (1u << f.ebits) - 1;
  const uint32_t man_all = (1u << f.mbits) - 1;
  const double a = std::fabs(v);
  if (std::isnan(v)) return sign | (exp_all << f.mbits) | man_all;
  if (a == 0) return sign;
  int e2 = 0;
  std::frexp(a, &e2);
  int biased = (e2 - 1) + f.bias;
  uint32_t man;
  if (biased >= 1) {
    man = static_cast<uint32_t>(std::nearbyint((std::ldexp(a, -(e2 - 1)) - 1.0) * (man_all + 1)));
    if (man > man_all) {
      man = 0;
      ++biased;
    }
  } else {  // subnormal
    man = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, f.bias - 1 + f.mbits)));
    biased = 0;
    if (man > man_all) {
      man = 0;
      biased = 1;
    }
  }
  const int max_biased = f.ieee ? static_cast<int>(exp_all) - 1 : static_cast<int>(exp_all);
  if (biased > max_biased || (!f.ieee && biased == max_biased && man == man_all)) {
    if (f.ieee) return sign | (exp_all << f.mbits);  // inf
    return sign | (exp_all << f.mbits) | man_all;    // e4m3fn has no inf: NaN
  }
  return sign | (static_cast<uint32_t>(biased) << f.mbits) | man;
}

double decode_mini(const MiniFloat& f, uint32_t bits) {
  const uint32_t exp_all = (1u << f.ebits) - 1;
  const uint32_t man_all = (1u << f.mbits) - 1;
  const bool neg = (bits >> (f.ebits + f.mbits)) & 1u;
  const uint32_t biased = (bits >> f.mbits) & exp_all;
  const uint32_t man = bits & man_all;
  double v;
  if (f.ieee && biased == exp_all) {
    v = man == 0 ? std::numeric_limits<double>::infinity()
                 : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ieee && biased == exp_all && man == man_all) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (biased == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - f.bias - f.mbits);
  } else {
    v = std::ldexp(1.0 + static_cast<double>(man) / (man_all + 1),
                   static_cast<int>(biased) - f.bias);
  }
  return neg ? -v : v;
}

bool is_float(cc_datatype_t t) {
  return t == CC_FLOAT16 || t == CC_FLOAT32 || t == CC_FLOAT64 || t == CC_BFLOAT16 ||
         t == CC_FLOAT8_E4M3 || t == CC_FLOAT8_E5M2;
}

bool is_reduction(Coll c) {
  return c == Coll::allreduce || c == Coll::reduce || c == Coll::reducescatter;
}

// How many distinct values a type holds exactly, for data movement.
uint64_t exact_range(cc_datatype_t t) {
  switch (t) {
    case CC_INT8:
      return 127;
    case CC_UINT8:
      return 255;
    case CC_FLOAT8_E5M2:
      return 8;
    case CC_FLOAT8_E4M3:
      return 16;
    case CC_BFLOAT16:
      return 256;
    case CC_FLOAT16:
      return 2048;
    default:
      return uint64_t{1} << 20;
  }
}

double tolerance(cc_datatype_t t) {
  switch (t) {
    case CC_FLOAT64:
      return 1e-12;
    case CC_FLOAT32:
      return 1e-5;
    case CC_FLOAT16:
      return 2e-3;
    case CC_BFLOAT16:
      return 1.6e-2;
    case CC_FLOAT8_E4M3:
      return 0.13;
    case CC_FLOAT8_E5M2:
      return 0.26;
    default:
      return 0;
  }
}

double reduce_at(const Shape& s, size_t i) {
  double acc = input_value(s, 0, i);
  for (int p = 1; p < s.nranks; ++p) acc = cc::reduce_step(s.op, acc, input_value(s, p, i));
  if (s.op == CC_AVG) {
    acc /= s.nranks;
    if (!is_float(s.dtype)) acc = std::floor(acc);  // NCCL divides integers after the sum
  }
  return acc;
}

// Whether `got` (one element) is right for the expected value.
bool matches(cc_datatype_t t, const uint8_t* got, double expected) {
  if (t == CC_FLOAT32) {  // the common case, without the generic codec
    float g;
    std::memcpy(&g, got, sizeof g);
    const float w = static_cast<float>(expected);
    return std::fabs(g - w) <= 1e-5f * std::max(1.0f, std::fabs(w));
  }
  uint8_t want[8] = {};
  encode(t, expected, want);
  if (!is_float(t)) return std::memcmp(got, want, dtype_size(t)) == 0;
  const double g = decode(t, got), w = decode(t, want);
  if (std::isnan(g) || std::isnan(w)) return false;
  if (std::isinf(w)) return g == w;
  return std::fabs(g - w) <= tolerance(t) * std::max(1.0, std::fabs(w));
}

// Runs body(begin, end) over [0, n) on a few threads for large n (the
// checks of a 512 MiB result take seconds on one core); returns the sum.
template <class F>
size_t parallel_sum(size_t n, F&& body) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = n < (size_t{1} << 20) ? 1 : std::min<size_t>(8, std::max(1u, cores / 2));
  if (threads == 1) return body(size_t{0}, n);
  std::vector<size_t> sums(threads, 0);
  std::vector<std::thread> pool;
  const size_t chunk = (n + threads - 1) / threads;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const size_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
      sums[t] = body(begin, end);
    });
  for (auto& th : pool) th.join();
  size_t total = 0;
  for (size_t v : sums) total += v;
  return total;
}

// A buffer of one block of `count` elements, or of one such block per rank.
size_t elems(const Shape& s, bool block_per_rank) {
  return block_per_rank ? s.count * static_cast<size_t>(s.nranks) : s.count;
}

}  // namespace

void encode(cc_datatype_t t, double v, uint8_t* out) {
  auto put_int = [&](size_t bytes) {
    const double c = std::fmax(-9.2e18, std::fmin(9.2e18, std::nearbyint(v)));
    const auto x = static_cast<uint64_t>(static_cast<int64_t>(c));
    for (size_t b = 0; b < bytes; ++b) out[b] = static_cast<uint8_t>(x >> (8 * b));
  };
  auto put_mini = [&](const MiniFloat& f) {
    const uint32_t bits = encode_mini(f, v);
    out[0] = static_cast<uint8_t>(bits);
    if (f.ebits + f.mbits >= 8) out[1] = static_cast<uint8_t>(bits >> 8);
  };
  switch (t) {
    case CC_INT8:
    case CC_UINT8:
      put_int(1);
      break;
    case CC_INT32:
    case CC_UINT32:
      put_int(4);
      break;
    case CC_INT64:
    case CC_UINT64:
      put_int(8);
      break;
    case CC_FLOAT16:
      put_mini(kHalf);
      break;
    case CC_BFLOAT16:
      put_mini(kBf16);
      break;
    case CC_FLOAT8_E4M3:
      out[0] = static_cast<uint8_t>(encode_mini(kE4m3, v));
      break;
    case CC_FLOAT8_E5M2:
      out[0] = static_cast<uint8_t>(encode_mini(kE5m2, v));
      break;
    case CC_FLOAT32: {
      const float f = static_cast<float>(v);
      std::memcpy(out, &f, 4);
      break;
    }
    case CC_FLOAT64:
      std::memcpy(out, &v, 8);
      break;
    case CC_NUM_DATATYPES:
      break;
  }
}

double decode(cc_datatype_t t, const uint8_t* in) {
  auto get = [&](size_t bytes) {
    uint64_t x = 0;
    for (size_t b = 0; b < bytes; ++b) x |= static_cast<uint64_t>(in[b]) << (8 * b);
    return x;
  };
  switch (t) {
    case CC_INT8:
      return static_cast<int8_t>(get(1));
    case CC_UINT8:
      return static_cast<double>(get(1));
    case CC_INT32:
      return static_cast<int32_t>(get(4));
    case CC_UINT32:
      return static_cast<double>(get(4));
    case CC_INT64:
      return static_cast<double>(static_cast<int64_t>(get(8)));
    case CC_UINT64:
      return static_cast<double>(get(8));
    case CC_FLOAT16:
      return decode_mini(kHalf, static_cast<uint32_t>(get(2)));
    case CC_BFLOAT16:
      return decode_mini(kBf16, static_cast<uint32_t>(get(2)));
    case CC_FLOAT8_E4M3:
      return decode_mini(kE4m3, in[0]);
    case CC_FLOAT8_E5M2:
      return decode_mini(kE5m2, in[0]);
    case CC_FLOAT32: {
      float f;
      std::memcpy(&f, in, 4);
      return f;
    }
    case CC_FLOAT64: {
      double d;
      std::memcpy(&d, in, 8);
      return d;
    }
    case CC_NUM_DATATYPES:
      break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

size_t send_elems(const Shape& s) {
  return elems(s, s.coll == Coll::reducescatter || s.coll == Coll::alltoall);
}

size_t recv_elems(const Shape& s) {
  if (s.coll == Coll::reduce && s.rank != s.root) return 0;
  return elems(s, s.coll == Coll::allgather || s.coll == Coll::alltoall);
}

double input_value(const Shape& s, int rank, size_t i) {
  uint64_t x = (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull ^
               (static_cast<uint64_t>(rank) + 1) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  if (is_reduction(s.coll)) return static_cast<double>(1 + x % 4);
  return static_cast<double>(x % exact_range(s.dtype));
}

void fill_send(const Shape& s, std::vector<uint8_t>* host) {
  const size_t es = dtype_size(s.dtype), n = send_elems(s);
  host->resize(n * es);
  uint8_t* p = host->data();
  parallel_sum(n, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) encode(s.dtype, input_value(s, s.rank, i), p + i * es);
    return size_t{0};
  });
}

size_t count_wrong(const Shape& s, const uint8_t* recv) {
  const size_t es = dtype_size(s.dtype);
  const size_t c = s.count;
  const int n = s.nranks, r = s.rank;
  const size_t total = recv_elems(s);
  // The value element `at` of this rank's receive buffer must hold.
  auto expected = [&](size_t at) -> double {
    switch (s.coll) {
      case Coll::allreduce:
      case Coll::reduce:
        return reduce_at(s, at);
      case Coll::reducescatter:
        return reduce_at(s, static_cast<size_t>(r) * c + at);
      case Coll::broadcast:
        return input_value(s, s.root, at);
      case Coll::allgather:
        return input_value(s, static_cast<int>(at / c), at % c);
      case Coll::alltoall:
        return input_value(s, static_cast<int>(at / c), static_cast<size_t>(r) * c + at % c);
      case Coll::sendrecv:
        return input_value(s, (r - 1 + n) % n, at);
    }
    return 0;
  };
  return parallel_sum(total, [&](size_t begin, size_t end) {
    size_t wrong = 0;
    for (size_t at = begin; at < end; ++at)
      if (!matches(s.dtype, recv + at * es, expected(at))) ++wrong;
    return wrong;
  });
}

}  // namespace cc::tools::bench
