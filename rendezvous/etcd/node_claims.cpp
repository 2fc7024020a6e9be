// The etcd node agent's claims (node_agent.hpp): a node's join claims
// batched into one transaction, each answered as it would have been alone.
#include <algorithm>

#include "common/log.hpp"
#include "rendezvous/etcd/node_agent_impl.hpp"
#include "rendezvous/etcd/wire.hpp"

namespace cc::rv::etcd::node {

namespace {

constexpr size_t kMaxOpsPerSide = 120;  // etcd's default limit is 128

bool reads(const json& request) {
  for (const json& op : request.value("success", json::array()))
    if (op.contains("request_range")) return true;
  return false;
}

// Whether a claim may share a transaction: its conditions are all "this key
// is absent" and what it reads when they fail is among those keys, so its
// own answer can be cut out of a shared one (below).
bool batchable(const json& request) {
  std::set<std::string> keys;
  for (const json& c : request.value("compare", json::array())) {
    if (c.value("target", "") != "CREATE" || c.value("result", "") != "EQUAL" ||
        c.contains("range_end") || wire::num(c, "create_revision") != 0)
      return false;
    keys.insert(c.value("key", ""));
  }
  for (const json& op : request.value("failure", json::array())) {
    auto r = op.find("request_range");
    if (r == op.end() || r->contains("range_end") || keys.count(r->value("key", "")) == 0)
      return false;
  }
  return !reads(request);
}

}  // namespace

// The claims waiting, as many as one transaction takes. A claim that also
// reads (rank 0 reads who came before it) would not see the puts after it
// in a batch: it goes alone.
std::vector<Agent::Impl::Claim> Agent::Impl::take_batch() {
  std::vector<Claim> batch;
  size_t compares = 0, puts = 0;
  while (!claims.empty() && batch.size() < opt.max_claims) {
    const json& r = claims.front().request;
    if (reads(r)) {
      if (batch.empty()) {
        batch.push_back(std::move(claims.front()));
        claims.pop_front();
      }
      break;
    }
    const size_t c = r.contains("compare") ? r["compare"].size() : 0;
    const size_t p = r.contains("success") ? r["success"].size() : 0;
    if (!batch.empty() && (compares + c > kMaxOpsPerSide || puts + p > kMaxOpsPerSide)) break;
    compares += c;
    puts += p;
    batch.push_back(std::move(claims.front()));
    claims.pop_front();
  }
  return batch;
}

// The batch as one transaction: every claim's conditions (each key once)
// and its puts. When it succeeds each claim gets its puts' answers. When it
// fails, one read of every key the conditions name tells which claims
// failed: each of those gets the answer it would have had alone, now (its
// own reads); the others go into the next batch. A batch sent twice (an
// answer lost, the attempt repeated on another member) thus costs two more
// requests, not one per claim. (Reads in the batch's own failure branch
// would save one, but made every successful batch cost etcd more.)
void Agent::Impl::run_claims(std::vector<Claim> batch) {
  {
    std::lock_guard<std::mutex> lock(mu);
    counts.claims += batch.size();
  }
  std::vector<Claim> alone;
  if (batch.size() > 1) {
    std::vector<Claim> shared;
    for (Claim& c : batch) (batchable(c.request) ? shared : alone).push_back(std::move(c));
    batch = std::move(shared);
  } else {
    alone = std::move(batch);
    batch.clear();
  }
  if (batch.size() == 1) alone.push_back(std::move(batch.front()));
  if (batch.size() > 1) {
    json merged{{"compare", json::array()}, {"success", json::array()}};
    json reads{{"success", json::array()}};
    std::vector<std::string> keys;  // base64, in the order of the failure's reads
    std::vector<size_t> puts;
    for (const Claim& c : batch) {
      for (const json& cmp : c.request.value("compare", json::array())) {
        const std::string key = cmp.value("key", "");
        if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
        keys.push_back(key);
        merged["compare"].push_back(cmp);
        reads["success"].push_back(json{{"request_range", json{{"key", key}}}});
      }
      const json success = c.request.value("success", json::array());
      puts.push_back(success.size());
      for (const json& op : success) merged["success"].push_back(op);
    }
    std::string text;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counts.transactions;
    }
    Status s = etcd->txn_text(merged.dump(), after(opt.backend.request_timeout), &text);
    json answer = s.ok() ? json::parse(text, nullptr, false) : json();
    json responses = answer.is_object() ? answer.value("responses", json::array()) : json::array();
    json header = answer.is_object() ? answer.value("header", json::object()) : json();
    if (answer.is_object() && !wire::flag(answer, "succeeded")) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++counts.transactions;
      }
      s = etcd->txn_text(reads.dump(), after(opt.backend.request_timeout), &text);
      answer = s.ok() ? json::parse(text, nullptr, false) : json();
      if (answer.is_object()) {
        responses = answer.value("responses", json::array());
        header = answer.value("header", json::object());
        answer.erase("succeeded");  // what the batch did, for the branches below
      }
    }
    if (!s.ok() || !answer.is_object()) {
      log().debug("node agent: a batch of {} claims: {}", batch.size(), s.message);
      for (Claim& c : batch) alone.push_back(std::move(c));
    } else if (wire::flag(answer, "succeeded") && responses.size() == merged["success"].size()) {
      {
        std::lock_guard<std::mutex> lock(mu);
        saw_revision(wire::num(header, "revision"));
      }
      size_t at = 0;
      for (size_t k = 0; k < batch.size(); ++k) {
        json one{{"header", header}, {"succeeded", true}, {"responses", json::array()}};
        for (size_t n = 0; n < puts[k]; ++n) one["responses"].push_back(responses[at++]);
        batch[k].done(Status::success(), one.dump());
      }
    } else if (!wire::flag(answer, "succeeded") && responses.size() == keys.size()) {
      std::map<std::string, json> read;  // key -> its range answer
      for (size_t k = 0; k < keys.size(); ++k) read[keys[k]] = responses[k];
      const auto present = [&](const std::string& key) {
        const json range = read[key].value("response_range", json::object());
        return !range.value("kvs", json::array()).empty();
      };
      std::vector<Claim> again;
      for (Claim& c : batch) {
        bool held = true;
        for (const json& cmp : c.request.value("compare", json::array()))
          held = held && !present(cmp.value("key", ""));
        if (held) {
          again.push_back(std::move(c));
          continue;
        }
        json one{{"header", header}, {"responses", json::array()}};
        for (const json& op : c.request.value("failure", json::array()))
          one["responses"].push_back(read[op["request_range"].value("key", "")]);
        c.done(Status::success(), one.dump());
      }
      if (!again.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        for (auto it = again.rbegin(); it != again.rend(); ++it) claims.push_front(std::move(*it));
        counts.claims -= again.size();  // counted again with their next batch
      }
    } else {
      for (Claim& c : batch) alone.push_back(std::move(c));
    }
  }
  for (Claim& c : alone) run_alone(c);
}

void Agent::Impl::run_alone(Claim& c) {
  {
    std::lock_guard<std::mutex> lock(mu);
    ++counts.transactions;
  }
  std::string text;
  Status s = etcd->txn_text(c.request.dump(), after(opt.backend.request_timeout), &text);
  if (s.ok()) {
    const json answer = json::parse(text, nullptr, false);
    if (answer.is_object() && answer.contains("header")) {
      std::lock_guard<std::mutex> lock(mu);
      saw_revision(wire::num(answer["header"], "revision"));
    }
  }
  c.done(s, text);
}

}  // namespace cc::rv::etcd::node
