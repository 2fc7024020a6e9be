// cc-bench --plot: a hand-written SVG of bus bandwidth and latency against
// size (log2 axis) for each series (cc and raw, out-of-place and in-place).
#pragma once

#include <string>

#include "tools/cc-bench/bench_report.hpp"

namespace cc::tools::bench {

// Writes the plot of one collective; false with the reason in `error`.
bool write_plot(const std::string& path, const RunInfo& info, const CollResults& res,
                std::string* error);

// The file for one collective of a run: `path` itself for a run of one
// collective, else "name-<collective>.svg" beside it.
std::string plot_path(const std::string& path, Coll coll, bool several);

}  // namespace cc::tools::bench
