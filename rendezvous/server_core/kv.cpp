// The key-value requests of one job: Set, Get, Add, Wait and Del. A job holds
// at most max_keys_per_job keys; a key that would pass the limit is refused
// and not stored. Add keeps a decimal 64-bit integer as the key's value and
// refuses a value it did not write and an overflow. A Get or Wait whose keys
// are not all set is answered at once when it has timeout_ms 0 (with
// Error(CC_ERR_TIMEOUT)), else parked (parked.cpp) until they are.
#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {
namespace {

std::optional<int64_t> parse_int64(const std::vector<uint8_t>& v) {
  const char* b = reinterpret_cast<const char*>(v.data());
  const char* e = b + v.size();
  int64_t out = 0;
  auto [p, ec] = std::from_chars(b, e, out);
  if (ec != std::errc() || p != e || v.empty()) return std::nullopt;
  return out;
}

}  // namespace

using server_core::key_list;
using server_core::quote;

// True when the job may hold `key`; else answers the request with an error.
bool ServerCore::Impl::key_room(Conn& c, uint32_t rid, const std::string& key) {
  Job& job = *c.job;
  if (job.keys.size() < opt.max_keys_per_job || job.keys.count(key)) return true;
  send_error(c.id, rid, CC_ERR_RENDEZVOUS,
             "job " + quote(job.id) + " holds the server's limit of " +
                 std::to_string(opt.max_keys_per_job) + " keys; key " + quote(key) +
                 " was not stored (delete keys or raise the limit)");
  return false;
}

bool ServerCore::Impl::on_set(Conn& c, uint32_t rid, const Set& s) {
  if (!key_room(c, rid, s.key)) return true;
  c.job->keys[s.key] = s.value;
  send(c.id, rid, Ok{});
  wake(*c.job, s.key);
  return true;
}

bool ServerCore::Impl::on_get(Conn& c, uint32_t rid, const Get& g, Clock::time_point now) {
  Job& job = *c.job;
  auto it = job.keys.find(g.key);
  if (it != job.keys.end()) {
    send(c.id, rid, Value{it->second});
    return true;
  }
  if (g.timeout_ms == 0) {
    send_error(
        c.id, rid, CC_ERR_TIMEOUT,
        "key " + quote(g.key) + " is not set in job " + quote(job.id) + " (get without waiting)");
    return true;
  }
  Parked p;
  p.kind = Parked::Kind::get;
  p.request_id = rid;
  p.job = &job;
  p.timeout_ms = g.timeout_ms;
  p.key = g.key;
  const uint64_t id = park(c, std::move(p), now);
  job.waiters[g.key].push_back(id);
  return true;
}

bool ServerCore::Impl::on_add(Conn& c, uint32_t rid, const Add& a) {
  Job& job = *c.job;
  int64_t current = 0;
  auto it = job.keys.find(a.key);
  if (it != job.keys.end()) {
    auto v = parse_int64(it->second);
    if (!v) {
      send_error(c.id, rid, CC_ERR_INVALID_ARGUMENT,
                 "add on key " + quote(a.key) + " of job " + quote(job.id) +
                     ": its value is not a decimal integer (it was set by set, not add); use "
                     "another key");
      return true;
    }
    current = *v;
  } else if (!key_room(c, rid, a.key)) {
    return true;
  }
  int64_t result = 0;
  if (__builtin_add_overflow(current, a.delta, &result)) {
    send_error(c.id, rid, CC_ERR_INVALID_ARGUMENT,
               "add on key " + quote(a.key) + " of job " + quote(job.id) + ": " +
                   std::to_string(current) + " + " + std::to_string(a.delta) +
                   " overflows a 64-bit integer");
    return true;
  }
  const std::string text = std::to_string(result);
  job.keys[a.key].assign(text.begin(), text.end());
  send(c.id, rid, Integer{result});
  wake(job, a.key);
  return true;
}

bool ServerCore::Impl::on_wait(Conn& c, uint32_t rid, const Wait& w, Clock::time_point now) {
  Job& job = *c.job;
  std::vector<const std::string*> missing;
  for (const auto& k : w.keys)
    if (!job.keys.count(k)) missing.push_back(&k);
  if (missing.empty()) {
    send(c.id, rid, Ok{});
    return true;
  }
  if (w.timeout_ms == 0) {
    std::vector<std::string> names;
    for (const auto* k : missing) names.push_back(*k);
    send_error(c.id, rid, CC_ERR_TIMEOUT,
               "wait on job " + quote(job.id) + " without waiting: not set: " + key_list(names));
    return true;
  }
  Parked p;
  p.kind = Parked::Kind::wait;
  p.request_id = rid;
  p.job = &job;
  p.timeout_ms = w.timeout_ms;
  p.keys = w.keys;
  p.missing = missing.size();
  const uint64_t id = park(c, std::move(p), now);
  for (const auto* k : missing) job.waiters[*k].push_back(id);
  return true;
}

bool ServerCore::Impl::on_del(Conn& c, uint32_t rid, const Del& d) {
  c.job->keys.erase(d.key);
  send(c.id, rid, Ok{});
  return true;
}

}  // namespace cc::rv
