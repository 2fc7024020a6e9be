// The text helpers of the rendezvous rules (see words.hpp).
#include "rendezvous/rules/words.hpp"

#include "common/printable.hpp"
#include "common/who.hpp"

namespace cc::rv::rules {

std::string quote(const std::string& s) { return "'" + printable(s) + "'"; }

std::string member_who(const MemberInfo& i) { return cc::who(i.rank, i.host, i.pid); }

bool is_loopback(const std::string& addr) { return addr.rfind("127.", 0) == 0 || addr == "::1"; }

std::string nccl_text(int32_t code) {
  if (code <= 0) return "unknown";
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

std::string rank_ranges(const std::vector<int32_t>& ranks) {
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

namespace {
constexpr size_t kShown = 16;  // names in one message, then "and N more"
}  // namespace

std::string named_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kShown) out += " and " + std::to_string(names.size() - kShown) + " more";
  return out;
}

std::string key_list(const std::vector<std::string>& keys) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) shown.push_back(quote(keys[i]));
  std::string out = named_list(shown);
  if (keys.size() > shown.size())
    out += " and " + std::to_string(keys.size() - shown.size()) + " more";
  return out;
}

const char* recover_call_name(RecoverKind k) {
  return k == RecoverKind::shrink ? "cc_comm_shrink" : "cc_comm_regrow";
}

std::string recover_call_words(RecoverKind k, int32_t nranks) {
  return k == RecoverKind::shrink ? "cc_comm_shrink"
                                  : "cc_comm_regrow(nranks=" + std::to_string(nranks) + ")";
}

std::string communicator_where(const std::string& job, uint32_t g) {
  return "communicator " + std::to_string(g) + " of job " + quote(job);
}

std::string lineage_where(const std::string& job, uint32_t g, uint32_t generation) {
  return "job " + quote(job) + ", communicator " + std::to_string(g) + ", generation " +
         std::to_string(generation);
}

}  // namespace cc::rv::rules
