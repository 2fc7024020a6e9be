#include "rendezvous/etcd/records.hpp"

#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

#include "rendezvous/etcd/json_object.hpp"

namespace cc::rv::etcd {
namespace {

using json = nlohmann::json;

std::string hex(const std::vector<uint8_t>& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

bool unhex(const std::string& text, std::vector<uint8_t>* out) {
  if (text.size() % 2 != 0) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  out->clear();
  out->reserve(text.size() / 2);
  for (size_t i = 0; i < text.size(); i += 2) {
    const int hi = nibble(text[i]);
    const int lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return true;
}

}  // namespace

std::string encode(const MemberRecord& r) {
  const MemberInfo& i = r.info;
  json j{{"rank", i.rank},
         {"world", i.world_size},
         {"gen", i.comm_number},
         {"host", i.host},
         {"pid", i.pid},
         {"nccl", i.nccl_version},
         {"driver", i.cuda_driver},
         {"runtime", i.cuda_runtime},
         {"gpu", i.gpu_uuid},
         {"addr", i.nccl_addr},
         {"hostkey", i.host_key},
         {"nonce", r.nonce}};
  if (!r.unique_id.empty()) j["id"] = hex(r.unique_id);
  if (!r.node.empty()) j["node"] = r.node;
  if (r.recovering)
    j["recover"] = {{"kind", static_cast<int>(r.kind)},
                    {"nranks", r.nranks},
                    {"shrink", r.can_shrink},
                    {"replacement", r.replacement}};
  return j.dump();
}

bool decode(const std::string& text, MemberRecord* out) {
  return decode_object(text, out, [](const json& j, MemberRecord& r) {
    r.info.rank = j.at("rank").get<int32_t>();
    r.info.world_size = j.at("world").get<int32_t>();
    r.info.comm_number = j.value("gen", 0u);
    r.info.host = j.value("host", "");
    r.info.pid = j.value("pid", 0u);
    r.info.nccl_version = j.value("nccl", 0);
    r.info.cuda_driver = j.value("driver", 0);
    r.info.cuda_runtime = j.value("runtime", 0);
    r.info.gpu_uuid = j.value("gpu", "");
    r.info.nccl_addr = j.value("addr", "");
    r.info.host_key = j.value("hostkey", "");
    r.nonce = j.value("nonce", "");
    r.node = j.value("node", "");
    if (!unhex(j.value("id", ""), &r.unique_id)) return false;
    if (j.contains("recover")) {
      const json& a = j.at("recover");
      const int kind = a.at("kind").get<int>();
      if (kind != static_cast<int>(RecoverKind::shrink) &&
          kind != static_cast<int>(RecoverKind::regrow))
        return false;
      r.recovering = true;
      r.kind = static_cast<RecoverKind>(kind);
      r.nranks = a.at("nranks").get<int32_t>();
      r.can_shrink = a.at("shrink").get<bool>();
      r.replacement = a.at("replacement").get<bool>();
    }
    return true;
  });
}

namespace {

// A generation's job ranks by rank as runs of consecutive ranks, [first,
// count] each: a shrink or regrow of W ranks that lost F is F + 1 runs at
// most, so the result every member receives stays O(F) bytes, not O(W)
// (O(W^2) over the members).
json member_runs(const std::vector<int32_t>& members) {
  json runs = json::array();
  for (size_t i = 0; i < members.size();) {
    size_t n = 1;
    while (i + n < members.size() && members[i + n] == members[i] + static_cast<int32_t>(n)) ++n;
    runs.push_back(json::array({members[i], n}));
    i += n;
  }
  return runs;
}

// The runs back as ranks; false when they hold more than `limit` ranks.
bool members_of(const json& runs, size_t limit, std::vector<int32_t>* out) {
  out->clear();
  for (const json& run : runs) {
    const int32_t first = run.at(0).get<int32_t>();
    const int64_t count = run.at(1).get<int64_t>();
    if (count < 1 || out->size() + static_cast<size_t>(count) > limit) return false;
    for (int64_t k = 0; k < count; ++k) out->push_back(first + static_cast<int32_t>(k));
  }
  return true;
}

}  // namespace

std::string encode(const ResultRecord& r) {
  if (!r.ok) return json{{"ok", false}, {"code", r.code}, {"words", r.words}}.dump();
  json j{{"ok", true},
         {"id", hex(r.unique_id)},
         {"world", r.world_size},
         {"checked", r.checked_revision}};
  if (!r.members.empty()) {
    j["member_runs"] = member_runs(r.members);
    j["failed"] = r.failed;
    j["method"] = r.method;
  }
  return j.dump();
}

bool decode(const std::string& text, ResultRecord* out) {
  return decode_object(text, out, [](const json& j, ResultRecord& r) {
    r.ok = j.at("ok").get<bool>();
    if (!r.ok) {
      r.code = j.at("code").get<uint32_t>();
      r.words = j.value("words", "");
    } else {
      if (!unhex(j.value("id", ""), &r.unique_id)) return false;
      r.world_size = j.at("world").get<int32_t>();
      r.checked_revision = j.value("checked", int64_t{0});
      if (j.contains("member_runs") || j.contains("members")) {
        if (j.contains("member_runs")) {
          if (r.world_size < 0 ||
              !members_of(j.at("member_runs"), static_cast<size_t>(r.world_size), &r.members))
            return false;
        } else {  // written by an earlier cc (every rank listed)
          r.members = j.at("members").get<std::vector<int32_t>>();
        }
        r.failed = j.at("failed").get<std::vector<int32_t>>();
        r.method = j.at("method").get<uint8_t>();
        if (r.members.size() != static_cast<size_t>(r.world_size)) return false;
      }
    }
    return true;
  });
}

std::string encode(const RosterRecord& r) {
  json hosts = json::array();
  json members = json::array();
  std::unordered_map<std::string, size_t> host_index;
  for (const MemberSummary& m : r.members) {
    auto [it, added] = host_index.try_emplace(m.host, host_index.size());
    if (added) hosts.push_back(m.host);
    members.push_back(json::array({it->second, m.pid}));
  }
  return json{{"hosts", hosts}, {"members", members}}.dump();
}

bool decode(const std::string& text, RosterRecord* out) {
  return decode_object(text, out, [](const json& j, RosterRecord& r) {
    const auto hosts = j.at("hosts").get<std::vector<std::string>>();
    const json& members = j.at("members");
    for (size_t rank = 0; rank < members.size(); ++rank) {
      const size_t h = members[rank].at(0).get<size_t>();
      if (h >= hosts.size()) return false;
      r.members.push_back(
          {static_cast<int32_t>(rank), hosts[h], members[rank].at(1).get<uint32_t>()});
    }
    return true;
  });
}

// The words a departure's kind is stored as; any other kind is stored, and
// read back, as "failed".
constexpr std::pair<PeerEventKind, const char*> kDepartureWords[] = {
    {PeerEventKind::aborted, "aborted"},
    {PeerEventKind::init_failed, "init_failed"},
};

const char* departure_word(PeerEventKind kind) {
  for (const auto& [k, word] : kDepartureWords)
    if (k == kind) return word;
  return "failed";
}

std::string encode(const Departure& d) {
  json j{{"kind", departure_word(d.kind)},
         {"rank", d.rank},
         {"host", d.host},
         {"pid", d.pid},
         {"reason", d.reason}};
  if (!d.with.empty()) j["with"] = d.with;
  return j.dump();
}

bool decode(const std::string& text, Departure* out) {
  return decode_object(text, out, [](const json& j, Departure& d) {
    const std::string kind = j.at("kind").get<std::string>();
    d.kind = PeerEventKind::failed;
    for (const auto& [k, word] : kDepartureWords)
      if (kind == word) d.kind = k;
    d.rank = j.at("rank").get<int32_t>();
    d.host = j.value("host", "");
    d.pid = j.value("pid", 0u);
    d.reason = j.value("reason", "");
    d.with = j.value("with", std::vector<int32_t>{});
    return true;
  });
}

}  // namespace cc::rv::etcd
