#include "tools/cc-bench/bench_options.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/datatypes.hpp"
#include "common/units.hpp"
#include "tools/cli/cli.hpp"

namespace cc::tools::bench {
namespace {

struct Named {
  const char* name;
  int value;
};

// nccl-tests' type names first (they are what we print), then aliases.
constexpr Named kTypes[] = {
    {"int8", CC_INT8},
    {"uint8", CC_UINT8},
    {"int32", CC_INT32},
    {"uint32", CC_UINT32},
    {"int64", CC_INT64},
    {"uint64", CC_UINT64},
    {"half", CC_FLOAT16},
    {"float", CC_FLOAT32},
    {"double", CC_FLOAT64},
    {"bfloat16", CC_BFLOAT16},
    {"f8e4m3", CC_FLOAT8_E4M3},
    {"f8e5m2", CC_FLOAT8_E5M2},
    {"char", CC_INT8},
    {"int", CC_INT32},
    {"float16", CC_FLOAT16},
    {"fp16", CC_FLOAT16},
    {"float32", CC_FLOAT32},
    {"fp32", CC_FLOAT32},
    {"float64", CC_FLOAT64},
    {"bf16", CC_BFLOAT16},
    {"float8_e4m3", CC_FLOAT8_E4M3},
    {"float8_e5m2", CC_FLOAT8_E5M2},
    {"fp8_e4m3", CC_FLOAT8_E4M3},
    {"fp8_e5m2", CC_FLOAT8_E5M2},
};
constexpr Named kOps[] = {
    {"sum", CC_SUM}, {"prod", CC_PROD}, {"max", CC_MAX}, {"min", CC_MIN}, {"avg", CC_AVG}};
constexpr Named kColls[] = {
    {"allreduce", static_cast<int>(Coll::allreduce)},
    {"allgather", static_cast<int>(Coll::allgather)},
    {"reducescatter", static_cast<int>(Coll::reducescatter)},
    {"broadcast", static_cast<int>(Coll::broadcast)},
    {"reduce", static_cast<int>(Coll::reduce)},
    {"alltoall", static_cast<int>(Coll::alltoall)},
    {"sendrecv", static_cast<int>(Coll::sendrecv)},
    {"all_reduce", static_cast<int>(Coll::allreduce)},
    {"all_gather", static_cast<int>(Coll::allgather)},
    {"reduce_scatter", static_cast<int>(Coll::reducescatter)},
    {"all_to_all", static_cast<int>(Coll::alltoall)},
};
constexpr Named kModes[] = {
    {"0", static_cast<int>(Modes::out_of_place)}, {"out", static_cast<int>(Modes::out_of_place)},
    {"1", static_cast<int>(Modes::in_place)},     {"in", static_cast<int>(Modes::in_place)},
    {"2", static_cast<int>(Modes::both)},         {"both", static_cast<int>(Modes::both)},
};
constexpr Named kMems[] = {
    {"default", static_cast<int>(Mem::device)},
    {"cuda", static_cast<int>(Mem::device)},
    {"cc", static_cast<int>(Mem::cc)},
};
constexpr Named kRegs[] = {
    {"auto", static_cast<int>(Reg::automatic)},
    {"none", static_cast<int>(Reg::none)},
    {"local", static_cast<int>(Reg::local)},
    {"window", static_cast<int>(Reg::window)},
};

template <size_t N>
bool lookup(const Named (&table)[N], const std::string& name, int* value) {
  for (const auto& t : table)
    if (name == t.name) {
      *value = t.value;
      return true;
    }
  return false;
}

template <size_t N>
std::string names(const Named (&table)[N], size_t first) {
  std::string s;
  for (size_t i = 0; i < first && i < N; ++i) s += std::string(i ? ", " : "") + table[i].name;
  return s;
}

bool parse_int(const std::string& text, long lo, long hi, long* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// "-n" of "-n,--iters": the name an option's message quotes.
std::string first_name(const std::string& names) { return names.substr(0, names.find(',')); }

constexpr const char* kUsage =
    "usage: cc-bench [options]   (one process per rank: under cc-run, mpirun, or with\n"
    "       RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT/LOCAL_RANK set by hand)";

constexpr const char* kFooter =
    "Times are the mean per iteration from CUDA events around the loop, the largest over\n"
    "ranks. algbw = size / time; busbw = algbw * factor as in nccl-tests (allreduce\n"
    "2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; broadcast, reduce, sendrecv 1).";

// cc-bench's options, writing into `o` as CLI11 parses them.
void add_options(cc::tools::cli::CommandLine& command_line, Options* o) {
  CLI::App& app = command_line.app();
  app.footer(kFooter);
  // Rejects a value with cc-bench's message, the flag as typed: "-d float7: unknown datatype; ...".
  auto bad = [&command_line](const char* flag, const std::string& value, const std::string& what) {
    cc::tools::cli::reject(command_line.spelled(flag) + " " + value + ": " + what);
  };
  // An integer in [lo, hi]; `what` for anything else.
  auto integer = [bad](const char* flag, const std::string& value, long lo, long hi,
                       const char* what) {
    long n = 0;
    if (!parse_int(value, lo, hi, &n)) bad(flag, value, what);
    return static_cast<int>(n);
  };
  // An option taking an integer in [lo, hi] into *target, N in --help.
  auto add_integer = [&app, integer](const std::string& names, long lo, long hi, const char* what,
                                     int* target, const char* help) {
    const std::string flag = first_name(names);
    return cc::tools::cli::add_value(app, names, "N", help, [=](const std::string& v) {
      *target = integer(flag.c_str(), v, lo, hi, what);
    });
  };
  // An option taking a size ("64K") into *target, SIZE in --help.
  auto add_size = [&app, bad](const std::string& names, size_t* target, const char* help) {
    const std::string flag = first_name(names);
    cc::tools::cli::add_value(app, names, "SIZE", help, [=](const std::string& v) {
      uint64_t bytes = 0;
      if (!cc::parse_bytes(v, &bytes)) bad(flag.c_str(), v, "not a size (e.g. 8, 64K, 32M, 1G)");
      *target = bytes;
    });
  };
  // An option taking one of `table`'s names into *target; `what` for anything else.
  auto add_choice = [&app, bad]<typename T, size_t N>(
                        const std::string& names, const Named(&table)[N], T* target,
                        const std::string& what, const char* help, const char* value_name) {
    const std::string flag = first_name(names);
    cc::tools::cli::add_value(app, names, value_name, help, [=, &table](const std::string& v) {
      int value = 0;
      if (!lookup(table, v, &value)) bad(flag.c_str(), v, what);
      *target = static_cast<T>(value);
    });
  };
  app.add_option_function<std::vector<std::string>>(
         "-C,--coll,--collective",
         [o, bad](const std::vector<std::string>& values) {
           o->colls.clear();  // the default goes once a collective is named
           for (const std::string& value : values) {
             size_t start = 0;
             while (start <= value.size()) {
               const size_t comma = value.find(',', start);
               const std::string name = value.substr(
                   start, comma == std::string::npos ? std::string::npos : comma - start);
               int v = 0;
               if (name == "all") {
                 for (size_t k = 0; k < 7; ++k)
                   o->colls.push_back(static_cast<Coll>(kColls[k].value));
               } else if (lookup(kColls, name, &v)) {
                 o->colls.push_back(static_cast<Coll>(v));
               } else {
                 bad("-C", value, "unknown collective; use one of " + names(kColls, 7) + ", all");
               }
               if (comma == std::string::npos) break;
               start = comma + 1;
             }
           }
         },
         "allreduce allgather reducescatter broadcast reduce alltoall\n"
         "sendrecv, or all; repeat or comma-separate (default allreduce)")
      ->option_text("NAME")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  add_size("-b,--minbytes", &o->min_bytes,
           "smallest size (default 8); K, M, G suffixes (powers of 1024)");
  add_size("-e,--maxbytes", &o->max_bytes, "largest size (default 64M)");
  cc::tools::cli::add_value(app, "-f,--stepfactor", "F", "size multiplier between rows (default 2)",
                     [o, bad](const std::string& v) {
                       char* end = nullptr;
                       o->factor = std::strtod(v.c_str(), &end);
                       if (*end != '\0' || !(o->factor > 1.0) || o->factor > 1024)
                         bad("-f", v, "the step factor must be a number above 1");
                     });
  add_choice("-d,--datatype", kTypes, &o->dtype,
             "unknown datatype; use one of " + names(kTypes, 12),
             "int8 uint8 int32 uint32 int64 uint64 half float double\n"
             "bfloat16 f8e4m3 f8e5m2 (default float)",
             "T");
  add_choice("-o,--op", kOps, &o->op, "unknown op; use one of " + names(kOps, 5),
             "sum prod max min avg (default sum)", "OP");
  add_integer("-r,--root", 0, 1 << 24, "not a rank", &o->root,
              "root of broadcast and reduce (default 0)")
      ->option_text("R");
  add_integer("-n,--iters", 1, 100000000, "iterations must be 1 or more", &o->iters,
              "timed iterations per size (default 20)");
  add_integer("-w,--warmup_iters", 0, 100000000, "warm-up iterations must be 0 or more", &o->warmup,
              "untimed iterations per size first (default 5)");
  add_integer("--small-iters", 1, 100000000, "iterations must be 1 or more", &o->small_iters,
              "timed iterations for sizes up to 64K (default: -n); their\n"
              "warm-up is at least N/10");
  cc::tools::cli::add_value(
      app, "-c,--check", "0|1", "check every result (default 1); #wrong counts bad elements",
      [o, integer](const std::string& v) { o->check = integer("-c", v, 0, 1, "use 0 or 1") == 1; });
  add_choice("-i,--inplace", kModes, &o->modes, "use 0 (out-of-place), 1 (in-place) or 2 (both)",
             "0 = out-of-place only, 1 = in-place only, 2 = both (default)", "MODE");
  app.add_flag("--raw", o->raw,
               "also time the same loop on a second, raw NCCL communicator\n"
               "and print cc next to raw with the ratio");
  app.add_flag("--check-cost", o->check_cost,
               "first time eager 8 B all-reduces with the call check on,\n"
               "on a communicator with it off (CC_CHECK_CALLS=0) and on one\n"
               "that records nothing (also CC_TRACE_BUFFER=0); print all three");
  add_integer("-G,--cudagraph", 0, 100000, "graph iterations must be 0 or more", &o->graph,
              "capture N iterations in a CUDA graph and time its replays");
  add_choice("--mem", kMems, &o->mem, "use default (cudaMalloc) or cc (cc_mem_alloc)",
             "buffers from cudaMalloc (default) or cc_mem_alloc, registered", "default|cc");
  add_choice("--reg", kRegs, &o->reg, "use auto, none, local or window",
             "with --mem cc: symmetric window when NCCL >= 2.27\n"
             "(auto), ncclCommRegister (local) or nothing",
             "auto|none|local|window");
  app.add_option("--csv", o->csv, "the table as CSV (written by rank 0)")->option_text("FILE");
  app.add_option("--json", o->json, "the run as JSON (written by rank 0)")->option_text("FILE");
  app.add_option("--plot", o->plot, "bandwidth and latency plots (written by rank 0)")
      ->option_text("FILE.svg");
  command_line.add_help();
}

}  // namespace

std::string usage() {
  Options o;
  cc::tools::cli::CommandLine command_line(kUsage, 25);
  add_options(command_line, &o);
  return command_line.help();
}

const char* coll_name(Coll c) {
  for (const auto& t : kColls)
    if (t.value == static_cast<int>(c)) return t.name;
  return "?";
}
const char* dtype_name(cc_datatype_t type) {
  for (const auto& t : kTypes)
    if (t.value == static_cast<int>(type)) return t.name;
  return "?";
}
const char* op_name(cc_redop_t op) {
  for (const auto& t : kOps)
    if (t.value == static_cast<int>(op)) return t.name;
  return "?";
}
const char* mem_name(Mem m) { return m == Mem::cc ? "cc" : "default"; }

size_t dtype_size(cc_datatype_t t) { return cc::datatype_size(t); }

bool parse_options(int argc, char** argv, Options* o, std::string* error) {
  error->clear();
  o->command = "cc-bench";
  for (int i = 1; i < argc; ++i) o->command += std::string(" ") + argv[i];
  cc::tools::cli::CommandLine command_line(kUsage, 25);
  add_options(command_line, o);
  const cc::tools::cli::Parsed parsed = command_line.parse(argc, argv, "option");
  if (!parsed.ok) {
    *error = parsed.error;  // empty for --help
    return false;
  }
  if (o->min_bytes > o->max_bytes) {
    *error = "-b " + std::to_string(o->min_bytes) + " is above -e " + std::to_string(o->max_bytes);
    return false;
  }
  if (o->reg != Reg::automatic && o->mem != Mem::cc) {
    *error = "--reg needs --mem cc (registration is for cc_mem_alloc buffers)";
    return false;
  }
  return true;
}

}  // namespace cc::tools::bench
