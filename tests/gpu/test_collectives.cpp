// Each collective x each datatype x each op, in-place and out-of-place, at
// counts 0, 1, odd and above 1M. Every rank runs the same loops in the same
// order; CHECK (never REQUIRE) keeps the ranks' collective sequences aligned.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "common/datatypes.hpp"
#include "tests/gpu/dtype_codec.hpp"
#include "tests/gpu/gpu_env.hpp"

using namespace cc::test;

namespace {

const size_t kCounts[] = {0, 1, 1001, (size_t{1} << 20) + 3};
const cc_redop_t kOps[] = {CC_SUM, CC_PROD, CC_MAX, CC_MIN, CC_AVG};

std::vector<cc_datatype_t> all_types() {
  std::vector<cc_datatype_t> v;
  for (int t = 0; t < CC_NUM_DATATYPES; ++t) v.push_back(static_cast<cc_datatype_t>(t));
  return v;
}

// Inputs every type holds exactly, whose reductions (for 2 ranks) are exact too.
double reduce_input(cc_redop_t op, int rank, size_t i) {
  if (op == CC_PROD) return (rank < 3 && (i + static_cast<size_t>(rank)) % 2 == 0) ? 2 : 1;
  return 1 + static_cast<double>((i * 7 + static_cast<size_t>(rank) * 3) % 4);
}
double plain_input(int rank, size_t i) {
  return 1 + static_cast<double>((i * 5 + static_cast<size_t>(rank)) % 8);
}

double reduce_expected(cc_redop_t op, size_t i, int nranks) {
  double acc = reduce_input(op, 0, i);
  for (int r = 1; r < nranks; ++r) acc = cc::reduce_step(op, acc, reduce_input(op, r, i));
  return op == CC_AVG ? acc / nranks : acc;
}

// Compares a downloaded buffer with want(i); one CHECK per buffer, naming
// the first wrong element.
template <class Want>
void verify(const std::string& what, cc_datatype_t t, const std::vector<uint8_t>& got, size_t count,
            Want want, bool integer_avg = false) {
  size_t wrong = 0, first = 0;
  double first_want = 0, first_got = 0;
  for (size_t i = 0; i < count; ++i) {
    const double w = want(i);
    const double g = decode(t, got.data(), i);
    const bool ok = integer_avg ? (g >= w - 1 && g <= w + 1) : close_enough(t, w, g);
    if (!ok && wrong++ == 0) {
      first = i;
      first_want = w;
      first_got = g;
    }
  }
  INFO(what << " on rank " << world_rank() << ": " << wrong << " of " << count
            << " elements wrong; first at " << first << ": want " << first_want << ", got "
            << first_got);
  CHECK(wrong == 0);
}

std::string label(const char* coll, cc_datatype_t t, const char* op, bool in_place, size_t count) {
  return std::string(coll) + " " + type_name(t) + (op ? std::string(" ") + op : "") +
         (in_place ? " in-place" : " out-of-place") + " count " + std::to_string(count);
}

std::vector<uint8_t> fill(cc_datatype_t t, size_t n, double (*value)(int, size_t, const void*),
                          int rank, const void* ctx) {
  std::vector<uint8_t> host(n * elem_size(t));
  for (size_t i = 0; i < n; ++i) encode(t, host.data(), i, value(rank, i, ctx));
  return host;
}

double reduce_value(int rank, size_t i, const void* ctx) {
  return reduce_input(*static_cast<const cc_redop_t*>(ctx), rank, i);
}
double plain_value(int rank, size_t i, const void*) { return plain_input(rank, i); }

// Every type, op, placement and count of a reduction into `count` elements:
// call(send, out, count, t, op) starts it; its result is checked where
// `has_result` (every rank of an all-reduce, the root of a reduce).
template <class Call>
void each_reduction(const char* coll, bool has_result, Call call) {
  const int rank = world_rank(), n = world_size();
  for (cc_datatype_t t : all_types())
    for (cc_redop_t op : kOps)
      for (bool in_place : {false, true})
        for (size_t count : kCounts) {
          const std::string what = label(coll, t, op_name(op), in_place, count);
          const size_t bytes = count * elem_size(t);
          DeviceBuffer send(bytes), recv(bytes);
          send.upload(fill(t, count, reduce_value, rank, &op));
          void* out = in_place ? send.get() : recv.get();
          if (!call_and_wait(what, call(send.get(), out, count, t, op))) continue;
          if (!has_result) continue;
          verify(
              what, t, (in_place ? send : recv).download(bytes), count,
              [&](size_t i) { return reduce_expected(op, i, n); }, op == CC_AVG && is_integer(t));
        }
}

}  // namespace

TEST_CASE("allreduce: every type, op, placement and count") {
  each_reduction("allreduce", true,
                 [](const void* send, void* out, size_t count, cc_datatype_t t, cc_redop_t op) {
                   return cc_allreduce(send, out, count, t, op, world(), cc_stream());
                 });
}

TEST_CASE("reduce: every type, op, placement and count, to the last rank") {
  const int root = world_size() - 1;
  each_reduction("reduce", world_rank() == root,
                 [root](const void* send, void* out, size_t count, cc_datatype_t t, cc_redop_t op) {
                   return cc_reduce(send, out, count, t, op, root, world(), cc_stream());
                 });
}

TEST_CASE("reducescatter: every type, op, placement and count") {
  const int rank = world_rank(), n = world_size();
  for (cc_datatype_t t : all_types())
    for (cc_redop_t op : kOps)
      for (bool in_place : {false, true})
        for (size_t count : kCounts) {
          const std::string what = label("reducescatter", t, op_name(op), in_place, count);
          const size_t es = elem_size(t), total = count * static_cast<size_t>(n);
          DeviceBuffer send(total * es), recv(count * es);
          send.upload(fill(t, total, reduce_value, rank, &op));
          const size_t my_offset = static_cast<size_t>(rank) * count * es;
          void* out = in_place ? static_cast<void*>(send.bytes() + my_offset) : recv.get();
          if (!call_and_wait(what,
                             cc_reducescatter(send.get(), out, count, t, op, world(), cc_stream())))
            continue;
          const auto got =
              in_place ? send.download(count * es, my_offset) : recv.download(count * es);
          verify(
              what, t, got, count,
              [&](size_t i) {
                return reduce_expected(op, static_cast<size_t>(rank) * count + i, n);
              },
              op == CC_AVG && is_integer(t));
        }
}

TEST_CASE("broadcast: every type, placement and count, from the last rank") {
  const int rank = world_rank(), n = world_size(), root = n - 1;
  for (cc_datatype_t t : all_types())
    for (bool in_place : {false, true})
      for (size_t count : kCounts) {
        const std::string what = label("broadcast", t, nullptr, in_place, count);
        const size_t bytes = count * elem_size(t);
        DeviceBuffer send(bytes), recv(bytes);
        recv.fill_junk();
        if (rank == root)
          send.upload(fill(t, count, plain_value, root, nullptr));
        else
          send.fill_junk();
        void* out = in_place ? send.get() : recv.get();
        if (!call_and_wait(what,
                           cc_broadcast(send.get(), out, count, t, root, world(), cc_stream())))
          continue;
        verify(what, t, (in_place ? send : recv).download(bytes), count,
               [&](size_t i) { return plain_input(root, i); });
      }
}

TEST_CASE("allgather: every type, placement and count") {
  const int rank = world_rank(), n = world_size();
  for (cc_datatype_t t : all_types())
    for (bool in_place : {false, true})
      for (size_t count : kCounts) {
        const std::string what = label("allgather", t, nullptr, in_place, count);
        const size_t es = elem_size(t), total = count * static_cast<size_t>(n);
        DeviceBuffer send(count * es), recv(total * es);
        recv.fill_junk();
        const size_t my_offset = static_cast<size_t>(rank) * count * es;
        const auto mine = fill(t, count, plain_value, rank, nullptr);
        const void* in = send.get();
        if (in_place) {
          recv.upload(mine, my_offset);
          in = recv.bytes() + my_offset;
        } else {
          send.upload(mine);
        }
        if (!call_and_wait(what, cc_allgather(in, recv.get(), count, t, world(), cc_stream())))
          continue;
        verify(what, t, recv.download(total * es), total,
               [&](size_t j) { return plain_input(static_cast<int>(j / count), j % count); });
      }
}

TEST_CASE("alltoall: every type and count") {
  const int rank = world_rank(), n = world_size();
  const auto value = [](int from, int to, size_t i) {
    return 1 + static_cast<double>(
                   (static_cast<size_t>(from) * 3 + static_cast<size_t>(to) * 5 + i) % 8);
  };
  for (cc_datatype_t t : all_types())
    for (size_t count : kCounts) {
      const std::string what = label("alltoall", t, nullptr, false, count);
      const size_t es = elem_size(t), total = count * static_cast<size_t>(n);
      std::vector<uint8_t> host(total * es);
      for (size_t j = 0; j < total; ++j)
        encode(t, host.data(), j, value(rank, static_cast<int>(j / count), j % count));
      DeviceBuffer send(total * es), recv(total * es);
      send.upload(host);
      if (!call_and_wait(what, cc_alltoall(send.get(), recv.get(), count, t, world(), cc_stream())))
        continue;
      verify(what, t, recv.download(total * es), total,
             [&](size_t j) { return value(static_cast<int>(j / count), rank, j % count); });
    }
}
