// cc-bench's command line: nccl-tests' flags, plus --raw, --csv, --json,
// --plot, -G and --mem.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cc/cc.h"

namespace cc::tools::bench {

enum class Coll { allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv };
enum class Modes { out_of_place, in_place, both };
enum class Mem { device, cc };  // cudaMalloc, or cc_mem_alloc
enum class Reg { automatic, none, local, window };

struct Options {
  std::vector<Coll> colls{Coll::allreduce};
  size_t min_bytes = 8;
  size_t max_bytes = size_t{64} << 20;
  double factor = 2.0;
  cc_datatype_t dtype = CC_FLOAT32;
  cc_redop_t op = CC_SUM;
  int root = 0;
  int iters = 20;
  int warmup = 5;
  int small_iters = 0;  // iterations for sizes up to 64K when > 0 (latency needs more)
  bool check = true;
  Modes modes = Modes::both;
  bool raw = false;
  bool check_cost = false;  // time eager 8 B all-reduces with the call check on and off first
  int graph = 0;  // iterations captured per CUDA graph; 0 = no graphs
  Mem mem = Mem::device;
  Reg reg = Reg::automatic;
  std::string csv, json, plot;
  std::string command;  // how the tool was called, for the reports
};

// Parses argv. Returns false with `error` set on a bad flag, or with an
// empty error for -h (the caller prints usage() to stdout).
bool parse_options(int argc, char** argv, Options* out, std::string* error);
std::string usage();  // the --help text

const char* coll_name(Coll c);
const char* dtype_name(cc_datatype_t t);  // nccl-tests' names: "float", "half", ...
const char* op_name(cc_redop_t op);       // "sum", ...
const char* mem_name(Mem m);
size_t dtype_size(cc_datatype_t t);

}  // namespace cc::tools::bench
