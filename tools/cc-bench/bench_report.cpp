#include "tools/cc-bench/bench_report.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "lib/fast/kernels.hpp"
#include "lib/fast/plan.hpp"
#include "tools/cc-bench/bench_coll.hpp"

namespace cc::tools::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const char* const kModeName[2] = {"out-of-place", "in-place"};
const char* const kImplName[2] = {"cc", "raw"};

bool uses_op(Coll c) {
  return c == Coll::allreduce || c == Coll::reduce || c == Coll::reducescatter;
}
bool uses_root(Coll c) { return c == Coll::broadcast || c == Coll::reduce; }
bool mode_on(const Options& o, int mode) {
  if (o.modes == Modes::both) return true;
  return (o.modes == Modes::in_place) == (mode == kInPlace);
}

std::string wrong_text(const Result& r) {
  if (!r.ran) return "-";
  if (r.wrong < 0) return "N/A";
  return std::to_string(static_cast<long long>(r.wrong));
}

using Json = nlohmann::ordered_json;  // fields in the order written

// A figure as the reports give it: six significant digits, as printf's %.6g
// writes them (whole numbers below 1e6 without a fraction, so a reader gets
// an integer where %.6g wrote one); null for NaN and infinity.
Json figure(double v) {
  if (!std::isfinite(v)) return nullptr;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  const double rounded = std::strtod(buf, nullptr);
  if (rounded == std::floor(rounded) && std::fabs(rounded) < 1e6)
    return static_cast<int64_t>(rounded);
  return rounded;
}

struct File {
  std::FILE* f = nullptr;
  ~File() {
    if (f != nullptr) std::fclose(f);
  }
};

bool open_file(const std::string& path, File* file, std::string* error) {
  file->f = std::fopen(path.c_str(), "w");
  if (file->f == nullptr) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool close_file(const std::string& path, File* file, std::string* error) {
  const bool ok = std::ferror(file->f) == 0 && std::fclose(file->f) == 0;
  file->f = nullptr;
  if (!ok) *error = "writing " + path + " failed: " + std::strerror(errno);
  return ok;
}

}  // namespace

std::string short_size(double bytes) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  if (bytes == std::floor(bytes))
    std::snprintf(buf, sizeof buf, "%.0f%s", bytes, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f%s", bytes, units[u]);
  return buf;
}

CcPath cc_path(const std::string& plan_text, size_t bytes, int nranks) {
  CcPath out;
  cc::fast::Plan plan;
  std::string why;
  if (bytes == 0 || !cc::fast::parse_plan(plan_text, &plan, &why)) return out;
  const cc::fast::Algo algo = plan.choose(bytes);
  out.path = cc::fast::algo_name(algo);
  out.blocks = cc::fast::grid_blocks(algo, bytes, nranks, plan.blocks);
  return out;
}

void print_run_header(std::FILE* out, const RunInfo& info) {
  const Options& o = info.opt;
  std::fprintf(out, "# %s\n", o.command.c_str());
  std::fprintf(out,
               "# cc %s, NCCL %s (headers %s), CUDA driver %d, runtime %d, "
               "NCCL_NVLS_ENABLE=%s\n",
               info.cc_version.c_str(), info.nccl_version.c_str(), info.nccl_header_version.c_str(),
               info.cuda_driver, info.cuda_runtime, info.nvls.c_str());
  std::fprintf(out, "# %d ranks; rank 0 on host %s, %s\n", info.nranks, info.host.c_str(),
               info.gpu.c_str());
  std::fprintf(out,
               "# dtype %s, op %s, root %d, iters %d, warm-up %d, check %d, graph %d, "
               "mem %s (registration %s)\n",
               dtype_name(o.dtype), op_name(o.op), o.root, o.iters, o.warmup, o.check ? 1 : 0,
               o.graph, mem_name(o.mem), info.registration.c_str());
  if (o.small_iters > 0)
    std::fprintf(out, "# sizes up to 64K: iters %d, warm-up %d\n", o.small_iters,
                 std::max(o.warmup, o.small_iters / 10));
  std::fprintf(out, "# rendezvous: %s server\n", info.rendezvous.c_str());
  std::fprintf(out,
               "# cc_comm_init: %.1f ms (first, largest over ranks, includes waiting for "
               "ranks to start)\n",
               info.cc_init_ms);
  if (info.cc_init_sync_ms >= 0)
    std::fprintf(out,
                 "# cc_comm_init: %.1f ms (all ranks starting together, largest over "
                 "ranks)\n",
                 info.cc_init_sync_ms);
  if (info.raw_init_ms >= 0)
    std::fprintf(out,
                 "# raw ncclCommInitRank: %.1f ms (all ranks starting together, largest "
                 "over ranks; ncclGetUniqueId and its broadcast took %.1f ms more)\n",
                 info.raw_init_ms, info.raw_id_ms);
  if (!info.allreduce_plan.empty())
    std::fprintf(out,
                 "# cc all-reduce plan: %s (512-thread blocks: ll one per 4 KiB; oneshot "
                 "two per 32 KiB chunk, half pushing, half reducing; twoshot one per chunk of a "
                 "rank's segment; the last two capped by blocks)\n",
                 info.allreduce_plan.c_str());
  std::fprintf(out, "# time: mean per iteration from CUDA events around %s, largest over ranks\n",
               o.graph > 0 ? "CUDA graph replays" : "the loop");
}

void print_table_header(std::FILE* out, const RunInfo& info, Coll coll) {
  const bool raw = info.opt.raw;
  std::fprintf(out, "#\n# %s, bus bandwidth factor %.4g\n#%47s", coll_name(coll),
               busbw_factor(coll, info.nranks), "");
  const int width = raw ? 65 : 33;
  for (int m = 0; m < 2; ++m)
    if (mode_on(info.opt, m)) std::fprintf(out, " %*s", -width, kModeName[m]);
  std::fprintf(out, "\n#%11s %12s %8s %6s %6s", "size", "count", "type", "redop", "root");
  for (int m = 0; m < 2; ++m) {
    if (!mode_on(info.opt, m)) continue;
    std::fprintf(out, " %9s %7s %7s %6s", "time", "algbw", "busbw", "#wrong");
    if (raw) std::fprintf(out, " %9s %8s %6s %6s", "raw time", "rawbusbw", "#wrong", "cc/raw");
  }
  std::fprintf(out, "\n#%11s %12s %8s %6s %6s", "(B)", "(elements)", "", "", "");
  for (int m = 0; m < 2; ++m) {
    if (!mode_on(info.opt, m)) continue;
    std::fprintf(out, " %9s %7s %7s %6s", "(us)", "(GB/s)", "(GB/s)", "");
    if (raw) std::fprintf(out, " %9s %8s %6s %6s", "(us)", "(GB/s)", "", "(bw)");
  }
  std::fprintf(out, "\n");
}

void print_row(std::FILE* out, const RunInfo& info, Coll coll, const Row& row) {
  const Options& o = info.opt;
  std::fprintf(out, " %11zu %12zu %8s %6s %6d", row.bytes, row.count, dtype_name(o.dtype),
               uses_op(coll) ? op_name(o.op) : "none", uses_root(coll) ? o.root : -1);
  for (int m = 0; m < 2; ++m) {
    if (!mode_on(o, m)) continue;
    const Result& c = row.r[kCc][m];
    if (c.ran)
      std::fprintf(out, " %9.2f %7.2f %7.2f %6s", c.time_us, c.algbw, c.busbw,
                   wrong_text(c).c_str());
    else
      std::fprintf(out, " %9s %7s %7s %6s", "-", "-", "-", "-");
    if (!o.raw) continue;
    const Result& r = row.r[kRaw][m];
    if (r.ran && c.ran)
      std::fprintf(out, " %9.2f %8.2f %6s %6.3f", r.time_us, r.busbw, wrong_text(r).c_str(),
                   r.time_us / c.time_us);
    else
      std::fprintf(out, " %9s %8s %6s %6s", "-", "-", "-", "-");
  }
  std::fprintf(out, "\n");
  std::fflush(out);
}

Goals goals(const CollResults& res) {
  Goals g{kNaN, kNaN};
  for (const Row& row : res.rows) {
    const Result& c = row.r[kCc][kOutOfPlace];
    const Result& r = row.r[kRaw][kOutOfPlace];
    if (!c.ran || !r.ran) continue;
    if (row.bytes >= (size_t{32} << 20)) {
      const double ratio = r.time_us / c.time_us;
      if (std::isnan(g.min_bw_ratio_large) || ratio < g.min_bw_ratio_large)
        g.min_bw_ratio_large = ratio;
    }
    if (row.bytes >= 8 && row.bytes <= (size_t{64} << 10)) {
      const double delta = c.time_us - r.time_us;
      if (std::isnan(g.max_latency_delta_us_small) || delta > g.max_latency_delta_us_small)
        g.max_latency_delta_us_small = delta;
    }
  }
  return g;
}

void print_summary(std::FILE* out, const RunInfo& info, const CollResults& res) {
  double sum = 0, wrong = 0;
  int n = 0;
  bool checked = false;
  for (const Row& row : res.rows)
    for (int m = 0; m < 2; ++m) {
      const Result& c = row.r[kCc][m];
      if (!c.ran) continue;
      sum += c.busbw;
      ++n;
      for (int i = 0; i < 2; ++i)
        if (row.r[i][m].ran && row.r[i][m].wrong >= 0) {
          checked = true;
          wrong += row.r[i][m].wrong;
        }
    }
  std::fprintf(
      out, "# %s: out of bounds values : %s\n", coll_name(res.coll),
      !checked ? "not checked (-c 0)"
               : (wrong == 0 ? "0 OK"
                             : (std::to_string(static_cast<long long>(wrong)) + " WRONG").c_str()));
  std::fprintf(out, "# %s: avg bus bandwidth    : %.3f GB/s (cc)\n", coll_name(res.coll),
               n > 0 ? sum / n : 0.0);
  if (!info.opt.raw) return;
  const Goals g = goals(res);
  if (!std::isnan(g.min_bw_ratio_large))
    std::fprintf(out, "# %s: cc/raw bus bandwidth, sizes >= 32M, out-of-place: at least %.4f\n",
                 coll_name(res.coll), g.min_bw_ratio_large);
  if (!std::isnan(g.max_latency_delta_us_small))
    std::fprintf(out, "# %s: cc - raw time, 8B..64K, out-of-place: at most %+.2f us\n",
                 coll_name(res.coll), g.max_latency_delta_us_small);
}

bool write_csv(const std::string& path, const RunInfo& info, const std::vector<CollResults>& all,
               std::string* error) {
  File file;
  if (!open_file(path, &file, error)) return false;
  std::FILE* f = file.f;
  std::fprintf(f,
               "collective,nranks,size_bytes,count,type,redop,root,mode,impl,mem,graph,"
               "time_us,algbw_gbs,busbw_gbs,wrong\n");
  for (const auto& res : all)
    for (const Row& row : res.rows)
      for (int m = 0; m < 2; ++m)
        for (int i = 0; i < 2; ++i) {
          const Result& r = row.r[i][m];
          if (!r.ran) continue;
          std::fprintf(f, "%s,%d,%zu,%zu,%s,%s,%d,%s,%s,%s,%d,%.3f,%.4f,%.4f,%s\n",
                       coll_name(res.coll), info.nranks, row.bytes, row.count,
                       dtype_name(info.opt.dtype),
                       uses_op(res.coll) ? op_name(info.opt.op) : "none",
                       uses_root(res.coll) ? info.opt.root : -1, kModeName[m], kImplName[i],
                       mem_name(info.opt.mem), info.opt.graph, r.time_us, r.algbw, r.busbw,
                       r.wrong < 0 ? "" : std::to_string(static_cast<long long>(r.wrong)).c_str());
        }
  return close_file(path, &file, error);
}

bool write_json(const std::string& path, const RunInfo& info, const std::vector<CollResults>& all,
                std::string* error) {
  const Options& o = info.opt;
  auto ms = [](double v) { return v < 0 ? Json() : figure(v); };  // -1: not measured
  Json collectives = Json::array();
  for (const auto& res : all) {
    Json rows = Json::array();
    for (const Row& row : res.rows)
      for (int m = 0; m < 2; ++m)
        for (int i = 0; i < 2; ++i) {
          const Result& r = row.r[i][m];
          if (!r.ran) continue;
          Json entry = {{"size", row.bytes},
                        {"count", row.count},
                        {"mode", kModeName[m]},
                        {"impl", kImplName[i]},
                        {"time_us", figure(r.time_us)},
                        {"algbw_gbs", figure(r.algbw)},
                        {"busbw_gbs", figure(r.busbw)},
                        {"wrong", r.wrong < 0 ? Json() : figure(r.wrong)}};
          if (i == kCc && res.coll == Coll::allreduce && !info.allreduce_plan.empty()) {
            const CcPath p = cc_path(info.allreduce_plan, row.bytes, info.nranks);
            entry["cc_path"] = p.path;
            entry["cc_blocks"] = p.blocks;
          }
          rows.push_back(std::move(entry));
        }
    const Goals g = goals(res);
    collectives.push_back(
        {{"name", coll_name(res.coll)},
         {"busbw_factor", figure(res.factor)},
         {"plot", res.plot.empty() ? Json() : Json(res.plot)},
         {"goals",
          {{"min_bw_ratio_ge_32M", figure(g.min_bw_ratio_large)},
           {"max_latency_delta_us_8B_64K", figure(g.max_latency_delta_us_small)}}},
         {"rows", rows}});
  }
  const Json j = {
      {"tool", "cc-bench"},
      {"format", 1},
      {"command", o.command},
      {"cc_version", info.cc_version},
      {"nccl_version", info.nccl_version},
      {"nccl_header_version", info.nccl_header_version},
      {"cuda_driver", info.cuda_driver},
      {"cuda_runtime", info.cuda_runtime},
      {"host", info.host},
      {"gpu", info.gpu},
      {"nranks", info.nranks},
      {"nccl_nvls_enable", info.nvls},
      {"rendezvous", info.rendezvous},
      {"dtype", dtype_name(o.dtype)},
      {"op", op_name(o.op)},
      {"root", o.root},
      {"iters", o.iters},
      {"warmup", o.warmup},
      {"small_iters", o.small_iters},
      {"check", o.check},
      {"graph", o.graph},
      {"mem", mem_name(o.mem)},
      {"registration", info.registration},
      {"raw", o.raw},
      {"timing", "mean per iteration (CUDA events), largest over ranks"},
      {"init_ms",
       {{"cc_comm_init_first", ms(info.cc_init_ms)},
        {"cc_comm_init", ms(info.cc_init_sync_ms)},
        {"raw_nccl_comm_init_rank", ms(info.raw_init_ms)},
        {"raw_unique_id_and_broadcast", ms(info.raw_id_ms)}}},
      {"allreduce_plan", info.allreduce_plan.empty() ? Json() : Json(info.allreduce_plan)},
      {"collectives", collectives},
  };
  File file;
  if (!open_file(path, &file, error)) return false;
  // Bytes that are not UTF-8 (the command line can hold any) become U+FFFD.
  const std::string text = j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), file.f);
  return close_file(path, &file, error);
}

}  // namespace cc::tools::bench
