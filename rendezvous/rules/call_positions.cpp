#include "rendezvous/rules/call_positions.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace cc::rv::rules {

std::string ranks_named(const std::vector<int32_t>& ranks) {
  constexpr size_t kNamed = 16;
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < kNamed; ++i)
    out += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  if (ranks.size() > kNamed) out += " and " + std::to_string(ranks.size() - kNamed) + " more";
  return out;
}

std::string positions_words(const std::vector<RankCall>& ranks) {
  constexpr size_t kGroups = 16;
  std::map<std::pair<uint64_t, std::string>, std::vector<int32_t>> groups;
  for (const RankCall& r : ranks)
    groups[{r.seq, r.seq == 0 ? std::string() : call_words(r.call)}].push_back(r.rank);
  if (groups.size() <= 1) return "";
  std::vector<std::pair<std::pair<uint64_t, std::string>, std::vector<int32_t>>> sorted(
      groups.begin(), groups.end());
  for (auto& [key, rk] : sorted) std::sort(rk.begin(), rk.end());
  // The largest group last (ties: the furthest ahead); the others by number.
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.size() != b.second.size()) return a.second.size() < b.second.size();
    return a.first.first < b.first.first;
  });
  auto in = [](const auto& group) {
    const bool one = group.second.size() == 1;
    if (group.first.first == 0)
      return ranks_named(group.second) + (one ? " has" : " have") + " made no collective call";
    return ranks_named(group.second) + (one ? " is" : " are") + " in op #" +
           std::to_string(group.first.first) + " " + group.first.second;
  };
  std::string out;
  const size_t others = sorted.size() - 1;
  for (size_t i = 0; i < others && i < kGroups - 1; ++i)
    out += (i == 0 ? "" : "; ") + in(sorted[i]);
  if (others > kGroups - 1) {
    size_t rest = 0;
    for (size_t i = kGroups - 1; i < others; ++i) rest += sorted[i].second.size();
    out += "; " + std::to_string(rest) + " more ranks are elsewhere";
  }
  return out + " while " + in(sorted.back());
}

}  // namespace cc::rv::rules
