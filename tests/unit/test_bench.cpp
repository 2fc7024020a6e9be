// cc-bench's host side, with no GPU: flags, the element codecs, the check of
// every collective's result (a wrong element must count, a right one must
// not), the nccl-tests formulas, and the reports (JSON read back by
// scripts/perf-report.py when PERF_REPORT names it).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/cc-bench/bench_coll.hpp"
#include "tools/cc-bench/bench_data.hpp"
#include "tools/cc-bench/bench_options.hpp"
#include "tools/cc-bench/bench_plot.hpp"
#include "tools/cc-bench/bench_report.hpp"

using namespace cc::tools::bench;

namespace {

// Parses into a fresh Options each time, so one case cannot leak into the next.
bool parse(std::vector<std::string> args, Options* o, std::string* error) {
  *o = Options{};
  std::vector<char*> argv;
  std::string name = "cc-bench";
  argv.push_back(name.data());
  for (auto& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data(), o, error);
}

std::vector<uint8_t> bytes_of(cc_datatype_t t, double v) {
  std::vector<uint8_t> b(dtype_size(t));
  encode(t, v, b.data());
  return b;
}

unsigned bits16(cc_datatype_t t, double v) {
  auto b = bytes_of(t, v);
  return b[0] | (b.size() > 1 ? b[1] << 8 : 0);
}

// What the collective leaves in rank r's receive buffer, made on the host
// from every rank's send buffer, reducing in double and rounding once.
std::vector<uint8_t> simulate(const Shape& s) {
  const size_t es = dtype_size(s.dtype), n = static_cast<size_t>(s.nranks), c = s.count;
  std::vector<std::vector<uint8_t>> send(n);
  for (int p = 0; p < s.nranks; ++p) {
    Shape sp = s;
    sp.rank = p;
    fill_send(sp, &send[static_cast<size_t>(p)]);
  }
  auto value = [&](size_t p, size_t i) { return decode(s.dtype, send[p].data() + i * es); };
  auto reduce = [&](size_t i) {
    double acc = value(0, i);
    for (size_t p = 1; p < n; ++p) {
      const double v = value(p, i);
      if (s.op == CC_SUM || s.op == CC_AVG) acc += v;
      if (s.op == CC_PROD) acc *= v;
      if (s.op == CC_MAX) acc = std::max(acc, v);
      if (s.op == CC_MIN) acc = std::min(acc, v);
    }
    if (s.op == CC_AVG) acc /= static_cast<double>(n);
    const bool integer = s.dtype == CC_INT8 || s.dtype == CC_UINT8 || s.dtype == CC_INT32 ||
                         s.dtype == CC_UINT32 || s.dtype == CC_INT64 || s.dtype == CC_UINT64;
    if (s.op == CC_AVG && integer) acc = std::trunc(acc);  // NCCL divides after the sum
    return acc;
  };
  std::vector<uint8_t> recv(recv_elems(s) * es);
  auto put = [&](size_t at, double v) { encode(s.dtype, v, recv.data() + at * es); };
  auto copy = [&](size_t at, size_t p, size_t i) {
    std::copy_n(send[p].data() + i * es, es, recv.data() + at * es);
  };
  const size_t r = static_cast<size_t>(s.rank);
  switch (s.coll) {
    case Coll::allreduce:
      for (size_t i = 0; i < c; ++i) put(i, reduce(i));
      break;
    case Coll::reduce:
      if (s.rank == s.root)
        for (size_t i = 0; i < c; ++i) put(i, reduce(i));
      break;
    case Coll::reducescatter:
      for (size_t i = 0; i < c; ++i) put(i, reduce(r * c + i));
      break;
    case Coll::broadcast:
      for (size_t i = 0; i < c; ++i) copy(i, static_cast<size_t>(s.root), i);
      break;
    case Coll::allgather:
      for (size_t p = 0; p < n; ++p)
        for (size_t i = 0; i < c; ++i) copy(p * c + i, p, i);
      break;
    case Coll::alltoall:
      for (size_t p = 0; p < n; ++p)
        for (size_t i = 0; i < c; ++i) copy(p * c + i, p, r * c + i);
      break;
    case Coll::sendrecv:
      for (size_t i = 0; i < c; ++i) copy(i, (r + n - 1) % n, i);
      break;
  }
  return recv;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("cc-bench flags parse like nccl-tests") {
  Options o;
  std::string error;
  REQUIRE(parse({"-b",     "8",     "-e",    "128M",
                 "-f",     "2",     "-d",    "bfloat16",
                 "-o",     "max",   "-r",    "1",
                 "-n",     "50",    "-w",    "10",
                 "-c",     "0",     "-i",    "1",
                 "--raw",  "-G",    "4",     "--mem",
                 "cc",     "--csv", "x.csv", "--json=x.json",
                 "--plot", "x.svg", "-C",    "allgather,sendrecv"},
                &o, &error));
  CHECK(error.empty());
  CHECK(o.min_bytes == 8);
  CHECK(o.max_bytes == (size_t{128} << 20));
  CHECK(o.dtype == CC_BFLOAT16);
  CHECK(o.op == CC_MAX);
  CHECK(o.root == 1);
  CHECK(o.iters == 50);
  CHECK(o.warmup == 10);
  CHECK_FALSE(o.check);
  CHECK(o.modes == Modes::in_place);
  CHECK(o.raw);
  CHECK(o.graph == 4);
  CHECK(o.mem == Mem::cc);
  CHECK(o.json == "x.json");
  REQUIRE(o.colls.size() == 2);
  CHECK(o.colls[0] == Coll::allgather);
  CHECK(o.colls[1] == Coll::sendrecv);

  Options all;
  REQUIRE(parse({"-C", "all"}, &all, &error));
  CHECK(all.colls.size() == 7);
}

TEST_CASE("cc-bench refuses bad flags in words") {
  Options o;
  std::string error;
  CHECK_FALSE(parse({"-d", "float7"}, &o, &error));
  CHECK(error.rfind("-d float7: unknown datatype; use one of int8,", 0) == 0);
  CHECK_FALSE(parse({"-C", "allreduce,bogus"}, &o, &error));
  CHECK(error.find("unknown collective") != std::string::npos);
  CHECK_FALSE(parse({"-b", "64M", "-e", "1K"}, &o, &error));
  CHECK(error == "-b 67108864 is above -e 1024");
  CHECK_FALSE(parse({"-n", "0"}, &o, &error));
  CHECK(error == "-n 0: iterations must be 1 or more");
  CHECK_FALSE(parse({"-e", "12Q"}, &o, &error));
  CHECK(error.find("not a size") != std::string::npos);
  CHECK_FALSE(parse({"--reg", "window"}, &o, &error));
  CHECK(error.find("--reg needs --mem cc") != std::string::npos);
  CHECK_FALSE(parse({"-w"}, &o, &error));
  CHECK(error == "-w needs a value");
  CHECK_FALSE(parse({"--frobnicate", "1"}, &o, &error));
  CHECK(error == "unknown option '--frobnicate'");
  CHECK_FALSE(parse({"-h"}, &o, &error));
  CHECK(error.empty());
}

TEST_CASE("sizes are spelled as everywhere in cc") {
  Options o;
  std::string error;
  REQUIRE(parse({"-b", "64KiB", "-e", "2MB"}, &o, &error));
  CHECK(o.min_bytes == 65536);
  CHECK(o.max_bytes == (size_t{2} << 20));
  CHECK_FALSE(parse({"-b", "-1"}, &o, &error));
  CHECK(error == "-b -1: not a size (e.g. 8, 64K, 32M, 1G)");
}

TEST_CASE("element codecs match the formats' bit patterns") {
  CHECK(bits16(CC_FLOAT16, 1.0) == 0x3c00);
  CHECK(bits16(CC_FLOAT16, -2.0) == 0xc000);
  CHECK(bits16(CC_FLOAT16, 65504.0) == 0x7bff);
  CHECK(bits16(CC_FLOAT16, 1e6) == 0x7c00);                   // overflow: inf
  CHECK(bits16(CC_FLOAT16, std::ldexp(1.0, -24)) == 0x0001);  // smallest subnormal
  CHECK(bits16(CC_BFLOAT16, 1.0) == 0x3f80);
  CHECK(bits16(CC_BFLOAT16, 256.0) == 0x4380);
  CHECK(bits16(CC_FLOAT8_E4M3, 1.0) == 0x38);
  CHECK(bits16(CC_FLOAT8_E4M3, 448.0) == 0x7e);
  CHECK(bits16(CC_FLOAT8_E5M2, 1.0) == 0x3c);
  CHECK(bits16(CC_FLOAT8_E5M2, 57344.0) == 0x7b);
  for (cc_datatype_t t : {CC_INT8, CC_UINT8, CC_INT32, CC_UINT32, CC_INT64, CC_UINT64, CC_FLOAT16,
                          CC_FLOAT32, CC_FLOAT64, CC_BFLOAT16, CC_FLOAT8_E4M3, CC_FLOAT8_E5M2})
    for (double v : {0.0, 1.0, 3.0, 7.0, 12.0}) {
      INFO(dtype_name(t) << " " << v);
      CHECK(decode(t, bytes_of(t, v).data()) == v);
    }
  CHECK(decode(CC_INT8, bytes_of(CC_INT8, -5).data()) == -5);
  CHECK(decode(CC_UINT8, bytes_of(CC_UINT8, 256 + 7).data()) == 7);  // wraps like the GPU
}

TEST_CASE("the check accepts every right result and counts wrong elements") {
  const Coll colls[] = {Coll::allreduce, Coll::reduce,   Coll::reducescatter, Coll::broadcast,
                        Coll::allgather, Coll::alltoall, Coll::sendrecv};
  const cc_datatype_t types[] = {CC_INT8,        CC_UINT8,      CC_INT32,   CC_UINT64,
                                 CC_FLOAT16,     CC_FLOAT32,    CC_FLOAT64, CC_BFLOAT16,
                                 CC_FLOAT8_E4M3, CC_FLOAT8_E5M2};
  const cc_redop_t ops[] = {CC_SUM, CC_PROD, CC_MAX, CC_MIN, CC_AVG};
  for (int nranks : {2, 3}) {
    for (Coll coll : colls) {
      for (cc_datatype_t t : types) {
        for (cc_redop_t op : ops) {
          const bool reduction =
              coll == Coll::allreduce || coll == Coll::reduce || coll == Coll::reducescatter;
          if (!reduction && op != CC_SUM) continue;
          for (int rank = 0; rank < nranks; ++rank) {
            const Shape s{coll, t, op, nranks - 1, rank, nranks, 37};
            INFO(coll_name(coll) << " " << dtype_name(t) << " " << op_name(op) << " rank " << rank
                                 << " of " << nranks);
            std::vector<uint8_t> recv = simulate(s);
            CHECK(count_wrong(s, recv.data()) == 0);
            if (recv.empty()) continue;
            // Two elements off by a lot, one a NaN-like all-ones pattern.
            const size_t es = dtype_size(t);
            encode(t, decode(t, recv.data()) + 64, recv.data());
            std::fill_n(recv.data() + (recv.size() / es - 1) * es, es, uint8_t{0xff});
            CHECK(count_wrong(s, recv.data()) == 2);
          }
        }
      }
    }
  }
}

TEST_CASE("nccl-tests sizes and bus bandwidth factors") {
  CHECK(busbw_factor(Coll::allreduce, 2) == 1.0);
  CHECK(busbw_factor(Coll::allreduce, 8) == 1.75);
  CHECK(busbw_factor(Coll::allgather, 4) == 0.75);
  CHECK(busbw_factor(Coll::alltoall, 2) == 0.5);
  CHECK(busbw_factor(Coll::broadcast, 8) == 1.0);
  CHECK(busbw_factor(Coll::sendrecv, 8) == 1.0);
  CHECK(call_count(Coll::allreduce, 1024, 4, 2) == 256);
  CHECK(call_count(Coll::allgather, 1024, 4, 2) == 128);
  CHECK(call_count(Coll::allgather, 8, 8, 2) == 0);
  CHECK(row_bytes(Coll::allgather, 128, 4, 2) == 1024);
  CHECK(row_bytes(Coll::reducescatter, 3, 4, 3) == 36);
  CHECK(row_bytes(Coll::broadcast, 3, 4, 3) == 12);
  CHECK_FALSE(has_in_place(Coll::alltoall));
  CHECK(has_in_place(Coll::reducescatter));

  // In-place pointers as nccl-tests places them.
  char a[64], b[64];
  const Shape ag{Coll::allgather, CC_FLOAT32, CC_SUM, 0, 1, 2, 4};
  const Call c1 = make_call(ag, true, a, b);
  CHECK(c1.recv == b);
  CHECK(c1.send == b + 16);
  const Shape rs{Coll::reducescatter, CC_FLOAT32, CC_SUM, 0, 1, 2, 4};
  const Call c2 = make_call(rs, true, a, b);
  CHECK(c2.send == a);
  CHECK(c2.recv == a + 16);
  const Call c3 = make_call(rs, false, a, b);
  CHECK(c3.send == a);
  CHECK(c3.recv == b);
}

TEST_CASE("reports: CSV, JSON and SVG, and perf-report reads the JSON") {
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "cc-bench-test-XXXXXX").string();
  REQUIRE(mkdtemp(dir_template.data()) != nullptr);
  const std::string dir = dir_template;

  RunInfo info;
  info.opt.raw = true;
  info.opt.command = "cc-bench -C allreduce --raw";
  info.nranks = 2;
  info.host = "h\"ost";
  info.gpu = "Test GPU";
  info.nccl_version = "2.28.3";
  info.nccl_header_version = "2.28.9";
  info.cc_version = "0.1.0";
  info.nvls = "0";
  info.cc_init_ms = 300;
  info.cc_init_sync_ms = 210;
  info.raw_init_ms = 200;
  info.raw_id_ms = 1;
  CollResults res{Coll::allreduce, 1.0, {}, "allreduce.svg"};
  for (size_t size = 8; size <= (size_t{64} << 20); size *= 4) {
    Row row;
    row.bytes = size;
    row.count = size / 4;
    const double raw_us = 9.6 + static_cast<double>(size) / 300e3;
    const double cc_us = raw_us + 0.1;
    for (int m = 0; m < 2; ++m) {
      row.r[kCc][m] = {true, cc_us, static_cast<double>(size) / 1e3 / cc_us,
                       static_cast<double>(size) / 1e3 / cc_us, 0};
      row.r[kRaw][m] = {true, raw_us, static_cast<double>(size) / 1e3 / raw_us,
                        static_cast<double>(size) / 1e3 / raw_us, 0};
    }
    res.rows.push_back(row);
  }
  const Goals g = goals(res);
  CHECK(g.max_latency_delta_us_small == Approx(0.1));
  CHECK(g.min_bw_ratio_large < 1.0);
  CHECK(g.min_bw_ratio_large > 0.99);

  std::string error;
  REQUIRE(write_json(dir + "/allreduce.json", info, {res}, &error));
  REQUIRE(write_csv(dir + "/allreduce.csv", info, {res}, &error));
  REQUIRE(write_plot(dir + "/allreduce.svg", info, res, &error));
  const std::string json = slurp(dir + "/allreduce.json");
  CHECK(json.find("\"host\": \"h\\\"ost\"") != std::string::npos);
  CHECK(json.find("\"raw_nccl_comm_init_rank\": 200") != std::string::npos);
  const std::string csv = slurp(dir + "/allreduce.csv");
  CHECK(csv.rfind("collective,nranks,size_bytes,", 0) == 0);
  CHECK(csv.find("allreduce,2,8,2,float,sum,-1,out-of-place,cc,default,0,9.700,") !=
        std::string::npos);
  const std::string svg = slurp(dir + "/allreduce.svg");
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("raw NCCL, out-of-place") != std::string::npos);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(plot_path("out/x.svg", Coll::broadcast, true) == "out/x-broadcast.svg");
  CHECK(plot_path("out/x.svg", Coll::broadcast, false) == "out/x.svg");

  CHECK_FALSE(write_json("/nonexistent-dir/x.json", info, {res}, &error));
  CHECK(error.rfind("cannot write /nonexistent-dir/x.json: ", 0) == 0);

  if (const char* script = std::getenv("PERF_REPORT"); script != nullptr && *script != '\0') {
    const std::string cmd = std::string("python3 '") + script + "' '" + dir + "' --docs '" + dir +
                            "/docs' > '" + dir + "/report.log' 2>&1";
    INFO(slurp(dir + "/report.log"));
    REQUIRE(std::system(cmd.c_str()) == 0);
    const std::string md = slurp(dir + "/docs/PERFORMANCE.md");
    CHECK(md.find("### allreduce — cudaMalloc buffers") != std::string::npos);
    CHECK(md.find("| 32 MiB | ") != std::string::npos);
    CHECK(md.find("cc 210.0 ms, raw 200.0 ms | met |") != std::string::npos);
    CHECK(md.find("largest cc − raw +0.10 µs | met |") != std::string::npos);
    CHECK(md.find("lowest cc/raw 0.999") != std::string::npos);
    CHECK(md.find("![allreduce: bus bandwidth and latency](perf/allreduce.svg)") !=
          std::string::npos);
    CHECK(!slurp(dir + "/docs/perf/allreduce.svg").empty());
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}
