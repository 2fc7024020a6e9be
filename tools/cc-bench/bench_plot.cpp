#include "tools/cc-bench/bench_plot.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace cc::tools::bench {
namespace {

constexpr double kWidth = 900, kPanelH = 280, kLeft = 80, kRight = 190, kTop = 50, kGap = 70;

struct Series {
  const char* label;
  const char* color;
  bool dashed;
  std::vector<std::pair<double, double>> bw, lat;  // (log2 size, value)
};

struct Panel {
  double top;
  double x0, x1;  // log2 sizes
  double y0, y1;  // value range (log10 for latency)
  bool logy;
  double px(double x) const {
    const double w = kWidth - kLeft - kRight;
    return x1 > x0 ? kLeft + (x - x0) / (x1 - x0) * w : kLeft + w / 2;
  }
  double py(double y) const {
    const double v = logy ? std::log10(std::max(y, 1e-9)) : y;
    return top + kPanelH - (v - y0) / (y1 - y0) * kPanelH;
  }
};

double nice_ceiling(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

void axes(std::FILE* f, const Panel& p, const char* title, const char* ylabel) {
  const double right = kWidth - kRight, bottom = p.top + kPanelH;
  std::fprintf(f, "<text x='%.0f' y='%.0f' font-size='15' font-weight='bold'>%s</text>\n", kLeft,
               p.top - 12, title);
  std::fprintf(f,
               "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' "
               "stroke='#444'/>\n",
               kLeft, p.top, right - kLeft, kPanelH);
  // x ticks: powers of two, at most about 12 labels
  const int first = static_cast<int>(std::ceil(p.x0)), last = static_cast<int>(std::floor(p.x1));
  const int step = std::max(1, (last - first + 11) / 12);
  for (int e = first; e <= last; e += step) {
    const double x = p.px(e);
    std::fprintf(f, "<line x1='%.1f' y1='%.0f' x2='%.1f' y2='%.0f' stroke='#ddd'/>\n", x, p.top, x,
                 bottom);
    std::fprintf(f, "<text x='%.1f' y='%.0f' font-size='11' text-anchor='middle'>%s</text>\n", x,
                 bottom + 16, short_size(std::ldexp(1.0, e)).c_str());
  }
  std::fprintf(f,
               "<text x='%.0f' y='%.0f' font-size='12' text-anchor='middle'>size (bytes, "
               "log2 scale)</text>\n",
               (kLeft + right) / 2, bottom + 34);
  // y ticks
  if (p.logy) {
    for (int d = static_cast<int>(p.y0); d <= static_cast<int>(p.y1); ++d) {
      const double y = p.py(std::pow(10.0, d));
      std::fprintf(f, "<line x1='%.0f' y1='%.1f' x2='%.0f' y2='%.1f' stroke='#ddd'/>\n", kLeft, y,
                   right, y);
      std::fprintf(f, "<text x='%.0f' y='%.1f' font-size='11' text-anchor='end'>%g</text>\n",
                   kLeft - 6, y + 4, std::pow(10.0, d));
    }
  } else {
    for (int i = 0; i <= 5; ++i) {
      const double v = p.y0 + (p.y1 - p.y0) * i / 5, y = p.py(v);
      std::fprintf(f, "<line x1='%.0f' y1='%.1f' x2='%.0f' y2='%.1f' stroke='#ddd'/>\n", kLeft, y,
                   right, y);
      std::fprintf(f, "<text x='%.0f' y='%.1f' font-size='11' text-anchor='end'>%g</text>\n",
                   kLeft - 6, y + 4, v);
    }
  }
  std::fprintf(f,
               "<text transform='translate(%.0f,%.0f) rotate(-90)' font-size='12' "
               "text-anchor='middle'>%s</text>\n",
               kLeft - 52, p.top + kPanelH / 2, ylabel);
}

void draw(std::FILE* f, const Panel& p, const Series& s,
          const std::vector<std::pair<double, double>>& pts) {
  if (pts.empty()) return;
  std::fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2'%s points='", s.color,
               s.dashed ? " stroke-dasharray='6,4'" : "");
  for (const auto& [x, y] : pts) std::fprintf(f, "%.1f,%.1f ", p.px(x), p.py(y));
  std::fprintf(f, "'/>\n");
  for (const auto& [x, y] : pts)
    std::fprintf(f, "<circle cx='%.1f' cy='%.1f' r='2.5' fill='%s'/>\n", p.px(x), p.py(y), s.color);
}

}  // namespace

std::string plot_path(const std::string& path, Coll coll, bool several) {
  if (!several) return path;
  std::string base = path;
  if (base.size() > 4 && base.compare(base.size() - 4, 4, ".svg") == 0)
    base.resize(base.size() - 4);
  return base + "-" + coll_name(coll) + ".svg";
}

bool write_plot(const std::string& path, const RunInfo& info, const CollResults& res,
                std::string* error) {
  Series series[4] = {{"cc, out-of-place", "#1f77b4", false, {}, {}},
                      {"raw NCCL, out-of-place", "#ff7f0e", false, {}, {}},
                      {"cc, in-place", "#1f77b4", true, {}, {}},
                      {"raw NCCL, in-place", "#ff7f0e", true, {}, {}}};
  double xmin = 1e300, xmax = -1e300, bwmax = 0, latmin = 1e300, latmax = 0;
  for (const Row& row : res.rows) {
    if (row.bytes == 0) continue;
    const double x = std::log2(static_cast<double>(row.bytes));
    for (int m = 0; m < 2; ++m)
      for (int i = 0; i < 2; ++i) {
        const Result& r = row.r[i][m];
        if (!r.ran || !(r.time_us > 0)) continue;
        Series& s = series[m * 2 + i];
        s.bw.emplace_back(x, r.busbw);
        s.lat.emplace_back(x, r.time_us);
        xmin = std::min(xmin, x);
        xmax = std::max(xmax, x);
        bwmax = std::max(bwmax, r.busbw);
        latmin = std::min(latmin, r.time_us);
        latmax = std::max(latmax, r.time_us);
      }
  }
  if (xmin > xmax) {
    *error = "nothing to plot for " + std::string(coll_name(res.coll));
    return false;
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  const double height = kTop + 2 * kPanelH + kGap + 60;
  std::fprintf(f,
               "<?xml version='1.0' encoding='UTF-8'?>\n<svg xmlns='http://www.w3.org/2000/svg' "
               "width='%.0f' height='%.0f' viewBox='0 0 %.0f %.0f' "
               "font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n",
               kWidth, height, kWidth, height);
  std::fprintf(
      f,
      "<text x='%.0f' y='24' font-size='16'>cc-bench %s: %d ranks, %s, %s, NCCL %s"
      "%s</text>\n",
      kLeft, coll_name(res.coll), info.nranks, dtype_name(info.opt.dtype), info.gpu.c_str(),
      info.nccl_version.c_str(),
      info.opt.graph > 0 ? ", CUDA graphs" : (info.opt.mem == Mem::cc ? ", cc_mem_alloc" : ""));
  Panel bw{kTop + 20, xmin, xmax, 0, nice_ceiling(bwmax * 1.05), false};
  Panel lat{kTop + 20 + kPanelH + kGap,
            xmin,
            xmax,
            std::floor(std::log10(latmin)),
            std::max(std::ceil(std::log10(latmax)), std::floor(std::log10(latmin)) + 1),
            true};
  axes(f, bw, "bus bandwidth", "busbw (GB/s)");
  axes(f, lat, "latency", "time per operation (us, log scale)");
  int legend = 0;
  for (const Series& s : series) {
    if (s.bw.empty()) continue;
    draw(f, bw, s, s.bw);
    draw(f, lat, s, s.lat);
    const double y = kTop + 30 + 22 * legend++, x = kWidth - kRight + 14;
    std::fprintf(f,
                 "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='%s' stroke-width='2'%s/>\n",
                 x, y, x + 26, y, s.color, s.dashed ? " stroke-dasharray='6,4'" : "");
    std::fprintf(f, "<text x='%.0f' y='%.0f' font-size='12'>%s</text>\n", x + 32, y + 4, s.label);
  }
  std::fprintf(f, "</svg>\n");
  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok) {
    *error = "writing " + path + " failed";
    return false;
  }
  return true;
}

}  // namespace cc::tools::bench
