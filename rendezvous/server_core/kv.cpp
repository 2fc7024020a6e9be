// The key-value requests of one job: Set, Get, Add, Wait, Del and
// CompareSet. A write that would pass a limit (max_keys_per_job,
// max_bytes_per_job, max_total_bytes) is refused with a message naming the limit
// and the flag that raises it, and nothing is stored; no key is ever evicted.
// The byte limits count what a key holds: its key and value bytes and
// ServerCore::kKeyOverhead.
// Add keeps a decimal 64-bit integer as the key's value and refuses a value
// it did not write and an overflow. A Get or Wait whose keys are not all set
// is answered at once when it has timeout_ms 0 (with Error(CC_ERR_TIMEOUT)),
// else parked (parked.cpp) until they are, within the limits on parked
// requests; deleting a key leaves the requests
// parked on it waiting. CompareSet writes only when the key's value is the
// one expected (or, with no expected value, when the key is absent), and then
// wakes the key's waiters as Set does.
// With a durable store (ServerOptions::durable) every write is kept there
// before it is applied and answered; a write it cannot keep is refused, and
// nothing changes. A write carries its client's session and request id: one
// sent again (after a failover, to the server that took over) is answered
// as it was the first time, never applied twice.
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

size_t held(const std::string& key, size_t value_size) {
  return ServerCore::kKeyOverhead + key.size() + value_size;
}

}  // namespace

using server_core::key_list;
using server_core::quote;
using server_core::session_of;

// True when the job may hold `key` with a value of value_size bytes (in place
// of its current value, if any); else answers the request with an error.
bool ServerCore::Impl::store_room(Conn& c, uint32_t rid, const std::string& key,
                                  size_t value_size) {
  Job& job = *c.job;
  auto it = job.keys.find(key);
  const size_t before = it == job.keys.end() ? 0 : held(key, it->second.size());
  const size_t after = held(key, value_size);
  const std::string what = "key " + quote(key) + " of job " + quote(job.id);
  if (it == job.keys.end() && job.keys.size() >= opt.max_keys_per_job) {
    counters.limit(LimitKind::max_keys_per_job);
    send_error(c.id, rid, CC_ERR_RENDEZVOUS,
               "the store is full: job " + quote(job.id) + " holds the server's limit of " +
                   std::to_string(opt.max_keys_per_job) + " keys; key " + quote(key) +
                   " was not stored (nothing is evicted). Delete keys the job no longer needs "
                   "(cc_store_delete) or raise the limit (cc-rendezvous --max-keys-per-job)");
    return false;
  }
  if (after > before && job.bytes - before + after > opt.max_bytes_per_job) {
    counters.limit(LimitKind::max_bytes_per_job);
    send_error(c.id, rid, CC_ERR_RENDEZVOUS,
               "the store is full: job " + quote(job.id) + " holds " + std::to_string(job.bytes) +
                   " bytes for its keys and values, and " + what + " (" + std::to_string(after) +
                   " bytes with what a key costs the server) would pass the server's limit of " +
                   std::to_string(opt.max_bytes_per_job) +
                   " bytes per job; it was not stored (nothing is evicted). Delete keys the job "
                   "no longer needs (cc_store_delete) or raise the limit (cc-rendezvous "
                   "--max-bytes-per-job)");
    return false;
  }
  if (after > before && total_bytes - before + after > opt.max_total_bytes) {
    counters.limit(LimitKind::max_total_bytes);
    send_error(c.id, rid, CC_ERR_RENDEZVOUS,
               "the store is full: the rendezvous server holds " + std::to_string(total_bytes) +
                   " bytes for keys and values in " + std::to_string(jobs.size()) + " jobs, and " +
                   what + " (" + std::to_string(after) +
                   " bytes with what a key costs the server) would pass its limit of " +
                   std::to_string(opt.max_total_bytes) +
                   " bytes in all; it was not stored (nothing is evicted). Delete keys that are "
                   "no longer needed, let finished jobs expire (cc-rendezvous --job-ttl) or raise "
                   "the limit (cc-rendezvous --max-total-bytes)");
    return false;
  }
  return true;
}

// Stores the value (room was checked) and keeps the byte counts.
void ServerCore::Impl::put_key(Job& job, const std::string& key, std::vector<uint8_t> value) {
  auto [it, fresh] = job.keys.try_emplace(key);
  const size_t before = fresh ? 0 : held(key, it->second.size());
  const size_t after = held(key, value.size());
  it->second = std::move(value);
  job.bytes = job.bytes - before + after;
  total_bytes = total_bytes - before + after;
}

void ServerCore::Impl::erase_key(Job& job, const std::string& key) {
  auto it = job.keys.find(key);
  if (it == job.keys.end()) return;
  const size_t size = held(key, it->second.size());
  job.bytes -= size;
  total_bytes -= size;
  job.keys.erase(it);
}

// The answer this session's request got already, when it is sent again.
std::optional<int64_t> ServerCore::Impl::answered_before(const Conn& c, uint32_t rid) const {
  if (c.hello.session.empty()) return std::nullopt;
  auto it = c.job->sessions.find(session_of(c));
  if (it == c.job->sessions.end() || it->second.request_id != rid) return std::nullopt;
  return it->second.answer;
}

// Keeps the write in the durable store (when there is one) and notes the
// session's answer; false when it could not be kept (the request was
// answered with the error).
bool ServerCore::Impl::keep_write(Conn& c, uint32_t rid, const std::string& key,
                                  const std::vector<uint8_t>* value, int64_t answer) {
  if (opt.durable) {
    DurableWrite w;
    w.job = c.job->id;
    w.key = key;
    if (value != nullptr) w.value = *value;
    w.session = session_of(c);
    w.request_id = rid;
    w.answer = answer;
    if (Status st = opt.durable->write(w); !st.ok()) {
      send_error(c.id, rid, st.code, st.message);
      return false;
    }
  }
  if (!c.hello.session.empty()) c.job->sessions[session_of(c)] = {rid, answer};
  return true;
}

bool ServerCore::Impl::on_set(Conn& c, uint32_t rid, const Set& s) {
  if (answered_before(c, rid)) {
    send(c.id, rid, Ok{});
    return true;
  }
  if (!store_room(c, rid, s.key, s.value.size())) return true;
  if (!keep_write(c, rid, s.key, &s.value, 0)) return true;
  put_key(*c.job, s.key, s.value);
  send(c.id, rid, Ok{});
  wake(*c.job, s.key);
  return true;
}

bool ServerCore::Impl::on_get(Conn& c, uint32_t rid, const Get& g, Clock::time_point now) {
  Job& job = *c.job;
  auto it = job.keys.find(g.key);
  if (it != job.keys.end()) {
    answer_value(c.id, rid, it->second);
    return true;
  }
  if (g.timeout_ms == 0) {
    send_error(
        c.id, rid, CC_ERR_TIMEOUT,
        "key " + quote(g.key) + " is not set in job " + quote(job.id) + " (get without waiting)");
    return true;
  }
  Parked p = Parked::of(Parked::Kind::get, rid, job, g.timeout_ms);
  p.cost = ServerCore::kParkedCost + g.key.size();
  if (!parked_room(c, rid, p.cost, "get of key " + quote(g.key) + " of job " + quote(job.id)))
    return true;
  p.key = g.key;
  park_on_keys(c, std::move(p), now);
  return true;
}

bool ServerCore::Impl::on_add(Conn& c, uint32_t rid, const Add& a) {
  if (std::optional<int64_t> total = answered_before(c, rid)) {
    send(c.id, rid, Integer{*total});
    return true;
  }
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
  if (!store_room(c, rid, a.key, text.size())) return true;
  std::vector<uint8_t> value(text.begin(), text.end());
  if (!keep_write(c, rid, a.key, &value, result)) return true;
  put_key(job, a.key, std::move(value));
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
  Parked p = Parked::of(Parked::Kind::wait, rid, job, w.timeout_ms);
  p.cost = ServerCore::kParkedCost;
  for (const auto& k : w.keys) p.cost += k.size();
  if (!parked_room(c, rid, p.cost,
                   "wait for " + std::to_string(w.keys.size()) + " keys of job " + quote(job.id)))
    return true;
  p.keys = w.keys;
  park_on_keys(c, std::move(p), now);
  return true;
}

bool ServerCore::Impl::on_del(Conn& c, uint32_t rid, const Del& d) {
  if (!answered_before(c, rid) && !keep_write(c, rid, d.key, nullptr, 0)) return true;
  erase_key(*c.job, d.key);
  send(c.id, rid, Ok{});
  return true;
}

bool ServerCore::Impl::on_compare_set(Conn& c, uint32_t rid, const CompareSet& m) {
  if (std::optional<int64_t> swapped = answered_before(c, rid)) {
    send(c.id, rid, CompareSetResult{*swapped != 0});
    return true;
  }
  Job& job = *c.job;
  auto it = job.keys.find(m.key);
  const bool match =
      m.has_expected ? it != job.keys.end() && it->second == m.expected : it == job.keys.end();
  if (!match) {
    send(c.id, rid, CompareSetResult{false});
    return true;
  }
  if (!store_room(c, rid, m.key, m.value.size())) return true;
  if (!keep_write(c, rid, m.key, &m.value, 1)) return true;
  put_key(job, m.key, m.value);
  send(c.id, rid, CompareSetResult{true});
  wake(job, m.key);
  return true;
}

}  // namespace cc::rv
