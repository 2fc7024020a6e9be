#include "rendezvous/etcd/keys.hpp"

#include <charconv>

namespace cc::rv::etcd {

std::string escape_component(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '%')
      out += "%25";
    else if (c == '/')
      out += "%2F";
    else
      out += c;
  }
  return out;
}

Keys::Keys(const std::string& prefix, const std::string& job_id) {
  std::string p = prefix;
  while (!p.empty() && p.back() == '/') p.pop_back();
  root_ = (p.empty() ? "" : p + "/") + escape_component(job_id) + "/";
}

std::string Keys::kv(const std::string& key) const { return root_ + "kv/" + key; }
std::string Keys::adds(const std::string& key) const {
  return root_ + "add/" + escape_component(key) + "/";
}
std::string Keys::writer(const std::string& key) const { return root_ + "writer/" + key; }
std::string Keys::generation(Gen g) const {
  return root_ + "gen/" + std::to_string(g.g) +
         (g.generation == 0 ? std::string() : "." + std::to_string(g.generation)) + "/";
}
std::string Keys::member_prefix(Gen g) const { return generation(g) + "member/"; }
std::string Keys::member(Gen g, int32_t rank) const {
  return member_prefix(g) + std::to_string(rank);
}
std::string Keys::news(Gen g) const { return generation(g) + "news/"; }
std::string Keys::result(Gen g) const { return news(g) + "result"; }
std::string Keys::roster(Gen g) const { return generation(g) + "roster"; }
std::string Keys::closing(Gen g) const { return generation(g) + "closing"; }
std::string Keys::events(Gen g) const { return news(g) + "events"; }
std::string Keys::gone(Gen g, int32_t rank) const {
  return generation(g) + "gone/" + std::to_string(rank);
}
std::string Keys::leaves(Gen g) const { return generation(g) + "leaves"; }
std::string Keys::coordinator(Gen g) const { return generation(g) + "coordinator"; }
std::string Keys::refused(Gen g, const std::string& nonce) const {
  return generation(g) + "refused/" + nonce;
}
std::string Keys::calls_prefix(Gen g) const { return generation(g) + "calls/"; }
namespace {

std::string split_part(uint32_t split, int32_t color) {
  return "s" + std::to_string(split) + "." + std::to_string(color);
}

}  // namespace

std::string Keys::calls(Gen g, uint32_t split, int32_t color, int32_t rank) const {
  return calls_prefix(g) + (split == 0 ? std::string() : split_part(split, color) + "/") +
         std::to_string(rank);
}
std::string Keys::mismatch(Gen g, uint32_t split, int32_t color) const {
  return news(g) + "mismatch" + (split == 0 ? std::string() : "/" + split_part(split, color));
}

std::optional<std::pair<uint32_t, int32_t>> Keys::calls_line(Gen g, const std::string& key) const {
  const std::string prefix = calls_prefix(g);
  if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  const char* p = key.data() + prefix.size();
  const char* e = key.data() + key.size();
  uint32_t split = 0;
  int32_t color = 0, rank = 0;
  if (*p == 's') {
    auto [q, ec] = std::from_chars(p + 1, e, split);
    if (ec != std::errc() || split == 0 || q == e || *q != '.') return std::nullopt;
    auto [r, ec2] = std::from_chars(q + 1, e, color);
    if (ec2 != std::errc() || r == e || *r != '/') return std::nullopt;
    p = r + 1;
  }
  auto [q, ec] = std::from_chars(p, e, rank);
  if (ec != std::errc() || q != e || rank < 0) return std::nullopt;
  return std::make_pair(split, color);
}
std::string Keys::latest(uint32_t join) const { return root_ + "latest/" + std::to_string(join); }

std::string Keys::preflight_ready_prefix(Gen g) const { return generation(g) + "preflight/ready/"; }
std::string Keys::preflight_ready(Gen g, int32_t rank) const {
  return preflight_ready_prefix(g) + std::to_string(rank);
}
std::string Keys::preflight_plan(Gen g, int32_t rank) const {
  return generation(g) + "preflight/plan/" + std::to_string(rank);
}
std::string Keys::preflight_report_prefix(Gen g) const {
  return generation(g) + "preflight/report/";
}
std::string Keys::preflight_report(Gen g, int32_t rank) const {
  return preflight_report_prefix(g) + std::to_string(rank);
}
std::string Keys::preflight_verdict(Gen g) const { return generation(g) + "preflight/verdict"; }

std::optional<int32_t> Keys::member_rank(Gen g, const std::string& key) const {
  return rank_under(member_prefix(g), key);
}

std::optional<int32_t> Keys::rank_under(const std::string& prefix, const std::string& key) {
  if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  int32_t rank = 0;
  const char* b = key.data() + prefix.size();
  const char* e = key.data() + key.size();
  auto [p, ec] = std::from_chars(b, e, rank);
  if (ec != std::errc() || p != e) return std::nullopt;
  return rank;
}

}  // namespace cc::rv::etcd
