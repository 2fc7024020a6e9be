#include "tools/cc-bench/bench_options.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ccbench {
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

}  // namespace

const char* usage() {
  return "usage: cc-bench [options]   (one process per rank: under cc-run, mpirun, or with\n"
         "       RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT/LOCAL_RANK set by hand)\n"
         "  -C, --coll NAME        allreduce allgather reducescatter broadcast reduce alltoall\n"
         "                         sendrecv, or all; repeat or comma-separate (default allreduce)\n"
         "  -b, --minbytes SIZE    smallest size (default 8); K, M, G suffixes (powers of 1024)\n"
         "  -e, --maxbytes SIZE    largest size (default 64M)\n"
         "  -f, --stepfactor F     size multiplier between rows (default 2)\n"
         "  -d, --datatype T       int8 uint8 int32 uint32 int64 uint64 half float double\n"
         "                         bfloat16 f8e4m3 f8e5m2 (default float)\n"
         "  -o, --op OP            sum prod max min avg (default sum)\n"
         "  -r, --root R           root of broadcast and reduce (default 0)\n"
         "  -n, --iters N          timed iterations per size (default 20)\n"
         "  -w, --warmup_iters N   untimed iterations per size first (default 5)\n"
         "  --small-iters N        timed iterations for sizes up to 64K (default: -n); their\n"
         "                         warm-up is at least N/10\n"
         "  -c, --check 0|1        check every result (default 1); #wrong counts bad elements\n"
         "  -i, --inplace MODE     0 = out-of-place only, 1 = in-place only, 2 = both (default)\n"
         "  --raw                  also time the same loop on a second, raw NCCL communicator\n"
         "                         and print cc next to raw with the ratio\n"
         "  -G, --cudagraph N      capture N iterations in a CUDA graph and time its replays\n"
         "  --mem default|cc       buffers from cudaMalloc (default) or cc_mem_alloc, registered\n"
         "  --reg auto|none|local|window  with --mem cc: symmetric window when NCCL >= 2.27\n"
         "                         (auto), ncclCommRegister (local) or nothing\n"
         "  --csv FILE, --json FILE, --plot FILE.svg   reports (written by rank 0)\n"
         "  -h, --help             this text\n"
         "Times are the mean per iteration from CUDA events around the loop, the largest over\n"
         "ranks. algbw = size / time; busbw = algbw * factor as in nccl-tests (allreduce\n"
         "2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; broadcast, reduce, sendrecv 1).\n";
}

bool parse_size(const std::string& text, size_t* bytes) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0) return false;
  std::string suffix(end);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix.size() == 2 && suffix[1] == 'i') suffix.pop_back();  // KiB, MiB
  unsigned shift = 0;
  if (suffix.empty())
    shift = 0;
  else if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else
    return false;
  if (v > (~0ull >> shift)) return false;
  *bytes = static_cast<size_t>(v << shift);
  return true;
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

size_t dtype_size(cc_datatype_t t) {
  switch (t) {
    case CC_INT8:
    case CC_UINT8:
    case CC_FLOAT8_E4M3:
    case CC_FLOAT8_E5M2:
      return 1;
    case CC_FLOAT16:
    case CC_BFLOAT16:
      return 2;
    case CC_INT32:
    case CC_UINT32:
    case CC_FLOAT32:
      return 4;
    case CC_INT64:
    case CC_UINT64:
    case CC_FLOAT64:
      return 8;
    case CC_NUM_DATATYPES:
      break;
  }
  return 0;
}

bool parse_options(int argc, char** argv, Options* o, std::string* error) {
  error->clear();
  o->command = "cc-bench";
  for (int i = 1; i < argc; ++i) o->command += std::string(" ") + argv[i];
  bool colls_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    const bool is_long = flag.rfind("--", 0) == 0;
    if (flag == "-h" || flag == "--help") return false;
    if (flag == "--raw") {
      o->raw = true;
      continue;
    }
    if (auto eq = flag.find('='); is_long && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    } else if (!is_long && flag.size() > 2 && flag[0] == '-') {
      value = flag.substr(2);  // -b8, -dfloat
      flag.resize(2);
    } else {
      if (i + 1 >= argc) {
        *error = flag + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    auto bad = [&](const std::string& what) {
      *error = flag + " " + value + ": " + what;
      return false;
    };
    long n = 0;
    int v = 0;
    if (flag == "-C" || flag == "--coll" || flag == "--collective") {
      if (!colls_given) o->colls.clear();
      colls_given = true;
      size_t start = 0;
      while (start <= value.size()) {
        const size_t comma = value.find(',', start);
        const std::string name =
            value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (name == "all") {
          for (size_t k = 0; k < 7; ++k) o->colls.push_back(static_cast<Coll>(kColls[k].value));
        } else if (lookup(kColls, name, &v)) {
          o->colls.push_back(static_cast<Coll>(v));
        } else {
          return bad("unknown collective; use one of " + names(kColls, 7) + ", all");
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (flag == "-b" || flag == "--minbytes") {
      if (!parse_size(value, &o->min_bytes)) return bad("not a size (e.g. 8, 64K, 32M, 1G)");
    } else if (flag == "-e" || flag == "--maxbytes") {
      if (!parse_size(value, &o->max_bytes)) return bad("not a size (e.g. 8, 64K, 32M, 1G)");
    } else if (flag == "-f" || flag == "--stepfactor") {
      char* end = nullptr;
      o->factor = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(o->factor > 1.0) || o->factor > 1024)
        return bad("the step factor must be a number above 1");
    } else if (flag == "-d" || flag == "--datatype") {
      if (!lookup(kTypes, value, &v))
        return bad("unknown datatype; use one of " + names(kTypes, 12));
      o->dtype = static_cast<cc_datatype_t>(v);
    } else if (flag == "-o" || flag == "--op") {
      if (!lookup(kOps, value, &v)) return bad("unknown op; use one of " + names(kOps, 5));
      o->op = static_cast<cc_redop_t>(v);
    } else if (flag == "-r" || flag == "--root") {
      if (!parse_int(value, 0, 1 << 24, &n)) return bad("not a rank");
      o->root = static_cast<int>(n);
    } else if (flag == "-n" || flag == "--iters") {
      if (!parse_int(value, 1, 100000000, &n)) return bad("iterations must be 1 or more");
      o->iters = static_cast<int>(n);
    } else if (flag == "-w" || flag == "--warmup_iters") {
      if (!parse_int(value, 0, 100000000, &n)) return bad("warm-up iterations must be 0 or more");
      o->warmup = static_cast<int>(n);
    } else if (flag == "--small-iters") {
      if (!parse_int(value, 1, 100000000, &n)) return bad("iterations must be 1 or more");
      o->small_iters = static_cast<int>(n);
    } else if (flag == "-c" || flag == "--check") {
      if (!parse_int(value, 0, 1, &n)) return bad("use 0 or 1");
      o->check = n == 1;
    } else if (flag == "-i" || flag == "--inplace") {
      if (value == "0" || value == "out")
        o->modes = Modes::out_of_place;
      else if (value == "1" || value == "in")
        o->modes = Modes::in_place;
      else if (value == "2" || value == "both")
        o->modes = Modes::both;
      else
        return bad("use 0 (out-of-place), 1 (in-place) or 2 (both)");
    } else if (flag == "-G" || flag == "--cudagraph") {
      if (!parse_int(value, 0, 100000, &n)) return bad("graph iterations must be 0 or more");
      o->graph = static_cast<int>(n);
    } else if (flag == "--mem") {
      if (value == "default" || value == "cuda")
        o->mem = Mem::device;
      else if (value == "cc")
        o->mem = Mem::cc;
      else
        return bad("use default (cudaMalloc) or cc (cc_mem_alloc)");
    } else if (flag == "--reg") {
      if (value == "auto")
        o->reg = Reg::automatic;
      else if (value == "none")
        o->reg = Reg::none;
      else if (value == "local")
        o->reg = Reg::local;
      else if (value == "window")
        o->reg = Reg::window;
      else
        return bad("use auto, none, local or window");
    } else if (flag == "--csv") {
      o->csv = value;
    } else if (flag == "--json") {
      o->json = value;
    } else if (flag == "--plot") {
      o->plot = value;
    } else {
      *error = "unknown option '" + flag + "'";
      return false;
    }
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

}  // namespace ccbench
