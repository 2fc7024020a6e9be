// Test data for cc-bench: the value each rank puts at each element, the
// result each collective must produce from it, and element codecs for every
// datatype (half, bfloat16 and float8 included) so the host can check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tools/cc-bench/bench_options.hpp"

namespace cc::tools::bench {

// What one rank sees of one collective run, in elements of `dtype`.
struct Shape {
  Coll coll;
  cc_datatype_t dtype;
  cc_redop_t op;
  int root;
  int rank;
  int nranks;
  size_t count;  // the count passed to the call (per-rank for allgather etc.)
};

// Elements in the send and receive buffers of a call.
size_t send_elems(const Shape& s);
size_t recv_elems(const Shape& s);

// Rank `rank`'s value at element i of its send buffer: small integers every
// type holds exactly (1..4 for reductions, wider for pure data movement).
double input_value(const Shape& s, int rank, size_t i);

// Writes this rank's send buffer (send_elems elements) into `host`.
void fill_send(const Shape& s, std::vector<uint8_t>* host);

// Counts the elements of this rank's receive buffer that differ from what
// the collective must produce (0 for ranks that receive nothing).
size_t count_wrong(const Shape& s, const uint8_t* recv);

// One element: encode a value, decode one back.
void encode(cc_datatype_t t, double v, uint8_t* out);
double decode(cc_datatype_t t, const uint8_t* in);

}  // namespace cc::tools::bench
