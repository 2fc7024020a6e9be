#include "tools/cc-doctor/trace_report.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <tuple>

#include "common/who.hpp"

namespace cc::tools::doctor {
namespace {

using Json = nlohmann::json;

std::string op(uint64_t seq) { return "op #" + std::to_string(seq); }

std::string ranks_words(const std::vector<int>& ranks) {
  return std::string(ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
  constexpr size_t kNamed = 16;
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < kNamed; ++i)
    out += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  if (ranks.size() > kNamed) out += " and " + std::to_string(ranks.size() - kNamed) + " more";
  return out;
}

bool parse_trace(const Json& j, const std::string& file, RankTrace* out, std::string* why) {
  try {
    if (!j.is_object() || j.value("format", "") != "cc-trace 1") {
      *why = "not a cc flight recorder file (no \"format\": \"cc-trace 1\")";
      return false;
    }
    RankTrace t;
    t.file = file;
    t.job = j.at("job").get<std::string>();
    t.comm_number = j.at("communicator").get<uint32_t>();
    t.generation = j.at("generation").get<uint32_t>();
    t.split = j.value("split", 0);
    t.rank = j.at("rank").get<int>();
    t.nranks = j.at("nranks").get<int>();
    t.host = j.value("host", "");
    t.pid = j.value("pid", 0u);
    t.reason = j.value("reason", "");
    t.failure = j.value("failure", "");
    for (const Json& c : j.at("calls")) {
      TraceCall call;
      call.line = c.at("line").get<std::string>();
      call.seq = c.at("seq").get<uint64_t>();
      call.peer = c.value("peer", -1);
      call.description = c.at("description").get<std::string>();
      call.fingerprint = c.at("fingerprint").get<std::string>();
      call.completed = c.value("completed_us", int64_t{0}) != 0;
      t.calls.push_back(std::move(call));
    }
    *out = std::move(t);
    return true;
  } catch (const Json::exception& e) {
    *why = std::string("a field is missing or of the wrong type: ") + e.what();
    return false;
  }
}

namespace {

CommunicatorReport analyse_one(std::vector<const RankTrace*> ranks) {
  std::sort(ranks.begin(), ranks.end(),
            [](const RankTrace* a, const RankTrace* b) { return a->rank < b->rank; });
  CommunicatorReport r;
  const RankTrace& first = *ranks.front();
  r.job = first.job;
  r.comm_number = first.comm_number;
  r.generation = first.generation;
  r.split = first.split;
  r.nranks = first.nranks;
  std::set<int> present;
  for (const RankTrace* t : ranks) {
    r.ranks.push_back(t->rank);
    present.insert(t->rank);
  }
  for (int i = 0; i < r.nranks; ++i)
    if (!present.count(i)) r.missing.push_back(i);

  // Each rank's collectives by number.
  std::vector<std::map<uint64_t, const TraceCall*>> by_seq(ranks.size());
  std::set<uint64_t> seqs;
  for (size_t i = 0; i < ranks.size(); ++i)
    for (const TraceCall& c : ranks[i]->calls)
      if (c.line == "collective") {
        by_seq[i][c.seq] = &c;
        seqs.insert(c.seq);
      }

  // The first op where two rings that hold it disagree.
  for (uint64_t s : seqs) {
    std::map<std::string, std::vector<int>> fps;
    std::map<std::string, std::string> descriptions;
    bool everyone = true;
    for (size_t i = 0; i < ranks.size(); ++i) {
      auto it = by_seq[i].find(s);
      if (it == by_seq[i].end()) {
        everyone = false;
        continue;
      }
      fps[it->second->fingerprint].push_back(ranks[i]->rank);
      descriptions[it->second->fingerprint] = it->second->description;
    }
    if (fps.size() <= 1) {
      if (everyone && fps.size() == 1) r.agreed_through = s;
      continue;
    }
    r.first_difference = s;
    for (auto& [fp, rk] : fps) r.difference.push_back({rk, descriptions[fp]});
    std::sort(r.difference.begin(), r.difference.end(), [](const CallGroup& a, const CallGroup& b) {
      return a.ranks.size() > b.ranks.size();
    });
    break;
  }
  r.difference_exact = r.first_difference != 0 && r.agreed_through + 1 == r.first_difference;

  // Sends and recvs: the k-th send from a to b against b's k-th recv from a.
  std::map<std::tuple<int, int, uint64_t>, std::pair<const TraceCall*, const TraceCall*>> pairs;
  for (const RankTrace* t : ranks)
    for (const TraceCall& c : t->calls) {
      if (c.line == "send") pairs[{t->rank, c.peer, c.seq}].first = &c;
      if (c.line == "recv") pairs[{c.peer, t->rank, c.seq}].second = &c;
    }
  for (const auto& [key, pr] : pairs) {
    if (pr.first == nullptr || pr.second == nullptr) continue;
    if (pr.first->fingerprint == pr.second->fingerprint) continue;
    const auto& [from, to, k] = key;
    r.pair_difference = "rank " + std::to_string(from) + "'s send #" + std::to_string(k) +
                        " to rank " + std::to_string(to) + " is " + pr.first->description +
                        ", but rank " + std::to_string(to) + "'s recv #" + std::to_string(k) +
                        " from rank " + std::to_string(from) + " is " + pr.second->description;
    break;
  }

  // Where each rank is, and what every rank completed.
  std::map<std::tuple<uint64_t, std::string, bool>, std::vector<int>> where;
  uint64_t all_done = UINT64_MAX;
  for (size_t i = 0; i < ranks.size(); ++i) {
    uint64_t done = 0;
    for (const auto& [s, c] : by_seq[i])
      if (c->completed) done = s;
    all_done = std::min(all_done, done);
    if (by_seq[i].empty()) {
      where[{0, "", false}].push_back(ranks[i]->rank);
      continue;
    }
    const TraceCall* last = by_seq[i].rbegin()->second;
    where[{last->seq, last->description, last->completed}].push_back(ranks[i]->rank);
  }
  r.completed_by_all = all_done == UINT64_MAX ? 0 : all_done;
  for (auto& [key, rk] : where)
    r.positions.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), rk});

  for (const RankTrace* t : ranks) {
    CommunicatorReport::Last l;
    l.rank = t->rank;
    l.who = who(t->rank, t->host, t->pid);
    l.reason = t->reason;
    l.failure = t->failure;
    const size_t n = t->calls.size();
    l.calls.assign(t->calls.begin() + static_cast<std::ptrdiff_t>(n > 5 ? n - 5 : 0),
                   t->calls.end());
    r.last_calls.push_back(std::move(l));
  }
  return r;
}

std::string call_state(const TraceCall& c) {
  return c.completed ? "complete" : "not seen complete";
}

std::string call_label(const TraceCall& c) {
  if (c.line == "collective") return op(c.seq);
  return c.line + " #" + std::to_string(c.seq) + (c.line == "send" ? " to rank " : " from rank ") +
         std::to_string(c.peer);
}

}  // namespace

std::vector<CommunicatorReport> analyse_traces(const std::vector<RankTrace>& traces) {
  std::map<std::tuple<std::string, uint32_t, int, uint32_t>, std::vector<const RankTrace*>> groups;
  for (const RankTrace& t : traces)
    groups[{t.job, t.comm_number, t.split, t.generation}].push_back(&t);
  std::vector<CommunicatorReport> out;
  for (auto& [key, ranks] : groups) out.push_back(analyse_one(ranks));
  return out;
}

std::string render_traces_text(const std::vector<CommunicatorReport>& reports) {
  std::string out;
  for (const CommunicatorReport& r : reports) {
    out += "job '" + r.job + "', communicator " + std::to_string(r.comm_number) +
           (r.split > 0 ? " (split " + std::to_string(r.split) + ")" : std::string()) +
           ", generation " + std::to_string(r.generation) + ": " + std::to_string(r.nranks) +
           " ranks, files from " + std::to_string(r.ranks.size()) +
           (r.missing.empty() ? std::string() : " (no file from " + ranks_words(r.missing) + ")") +
           "\n";
    if (r.first_difference != 0) {
      out += "  first difference: " + op(r.first_difference) + ":";
      for (size_t i = 0; i < r.difference.size(); ++i)
        out += std::string(i == 0 ? " " : "; ") + ranks_words(r.difference[i].ranks) + " called " +
               r.difference[i].description;
      if (r.difference_exact)
        out += "; the ranks diverged after " + op(r.agreed_through);
      else
        out += "; the rings agree up to " +
               (r.agreed_through == 0 ? std::string("no op they all hold") : op(r.agreed_through)) +
               ", so the calls may have differed earlier than the rings reach";
      out += "\n";
    } else {
      out += "  no difference among the collectives the rings hold\n";
    }
    if (!r.pair_difference.empty())
      out += "  first send/recv difference: " + r.pair_difference + "\n";
    if (r.positions.size() > 1) {
      // Sorted by number: the lowest are behind when any rank is further on.
      const uint64_t lowest = r.positions.front().seq;
      const bool spread = r.positions.back().seq != lowest;
      out += spread ? "  behind: " : "  where the ranks are: ";
      for (size_t i = 0; i < r.positions.size(); ++i) {
        const auto& p = r.positions[i];
        if (i > 0)
          out += spread && p.seq != lowest && r.positions[i - 1].seq == lowest ? "; ahead: " : "; ";
        out +=
            ranks_words(p.ranks) +
            (p.seq == 0 ? " made no collective call"
                        : (p.ranks.size() == 1 ? " is" : " are") + std::string(" in ") + op(p.seq) +
                              " " + p.description + (p.completed ? " (complete)" : ""));
      }
      out += "\n";
    } else if (!r.positions.empty() && r.positions[0].seq != 0) {
      out += "  every rank's last call is " + op(r.positions[0].seq) + " " +
             r.positions[0].description + "\n";
    }
    out += "  the last op every rank completed: " +
           (r.completed_by_all == 0 ? std::string("none") : op(r.completed_by_all)) + "\n";
    for (const auto& l : r.last_calls) {
      out += "  " + l.who + (l.reason.empty() ? "" : ", written on " + l.reason) + ":\n";
      if (!l.failure.empty()) out += "    failure: " + l.failure + "\n";
      for (const TraceCall& c : l.calls)
        out += "    " + call_label(c) + " " + c.description + " (" + call_state(c) + ")\n";
    }
  }
  if (reports.empty()) out = "no flight recorder files\n";
  return out;
}

nlohmann::json render_traces_json(const std::vector<CommunicatorReport>& reports) {
  Json all = Json::array();
  for (const CommunicatorReport& r : reports) {
    Json j = {{"job", r.job},         {"communicator", r.comm_number},
              {"split", r.split},     {"generation", r.generation},
              {"nranks", r.nranks},   {"ranks", r.ranks},
              {"missing", r.missing}, {"completed_by_all", r.completed_by_all}};
    if (r.first_difference != 0) {
      Json groups = Json::array();
      for (const CallGroup& g : r.difference)
        groups.push_back({{"ranks", g.ranks}, {"description", g.description}});
      j["first_difference"] = {{"op", r.first_difference},
                               {"calls", groups},
                               {"agreed_through", r.agreed_through},
                               {"exact", r.difference_exact}};
    } else {
      j["first_difference"] = nullptr;
    }
    j["pair_difference"] = r.pair_difference.empty() ? Json(nullptr) : Json(r.pair_difference);
    Json positions = Json::array();
    for (const auto& p : r.positions)
      positions.push_back({{"op", p.seq},
                           {"description", p.description},
                           {"completed", p.completed},
                           {"ranks", p.ranks}});
    j["positions"] = positions;
    Json last = Json::array();
    for (const auto& l : r.last_calls) {
      Json calls = Json::array();
      for (const TraceCall& c : l.calls)
        calls.push_back({{"line", c.line},
                         {"seq", c.seq},
                         {"peer", c.peer},
                         {"description", c.description},
                         {"completed", c.completed}});
      last.push_back({{"rank", l.rank},
                      {"who", l.who},
                      {"reason", l.reason},
                      {"failure", l.failure},
                      {"calls", calls}});
    }
    j["last_calls"] = last;
    all.push_back(j);
  }
  return {{"communicators", all}};
}

}  // namespace cc::tools::doctor
