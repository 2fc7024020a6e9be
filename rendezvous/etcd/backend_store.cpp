// The etcd backend's store: set, get, add, wait, delete and compare-set,
// with the semantics and words of cc's own server (server_core/kv.cpp).
//
// A key holds either a value put by set (kv/<key>) or a counter made by add,
// never both. A counter is not one value rewritten by each add (N concurrent
// adds on one value would be a compare-and-swap race that one writer wins
// per round: O(N^2) transactions) but one key per add under add/<key>/:
// one/<op> for an add of 1, any/<op> holding any other delta. An add is one
// transaction that puts its own key and, in the same transaction (so at the
// same revision), counts the adds of 1 and reads the other deltas: its result
// is the total of every add applied up to and including it. etcd applies
// transactions one at a time, so N concurrent adds of 1 get exactly 1..N,
// each in one round trip, with no retries. Why it is exactly-once: the
// transaction puts its key only while that key is absent (the op id is unique
// to this backend and call), so a copy sent again by the client after a lost
// answer finds the key and is not applied twice; its result is then the
// count of the adds created at or before that key's revision, read once
// more. Entries leave only together (set or delete of the key, which reset
// it), so the adds created before an entry that still exists are exactly
// those that existed when it was applied.
#include <charconv>
#include <unordered_set>

#include "rendezvous/etcd/backend.hpp"
#include "rendezvous/etcd/backend_impl.hpp"

namespace cc::rv::etcd {

namespace {

constexpr size_t kWaitBatch = 64;  // keys in one transaction: 2 ops each (etcd allows 128)

// Wide enough that a sum of 64-bit deltas that leaves 64 bits is seen.
__extension__ typedef __int128 Wide;

std::optional<int64_t> parse_int64(const std::string& v) {
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty()) return std::nullopt;
  return out;
}

bool fits(Wide v) { return v >= INT64_MIN && v <= INT64_MAX; }

std::string wide_text(Wide v) {
  if (fits(v)) return std::to_string(static_cast<int64_t>(v));
  const bool negative = v < 0;
  std::string out;
  for (; v != 0; v /= 10)
    out.insert(out.begin(), static_cast<char>('0' + (negative ? -(v % 10) : v % 10)));
  return negative ? "-" + out : out;
}

std::string as_string(std::span<const uint8_t> v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> as_bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// A counter as two ranges read at one revision: the adds of 1 (counted) and
// the other deltas (summed).
struct Tally {
  Wide total = 0;
  bool exists = false;  // some add since the last set or delete
};
Tally tally(const RangeResult& ones, const RangeResult& others) {
  Tally t;
  t.total = ones.count;
  t.exists = ones.count > 0 || !others.kvs.empty();
  for (const KeyValue& kv : others.kvs)
    if (auto v = parse_int64(kv.value)) t.total += *v;
  return t;
}

// The two reads of a counter; upto > 0: only the adds created at or before it.
std::vector<Op> counter_reads(const Keys& keys, const std::string& key, int64_t upto = 0) {
  Op others = Op::get_prefix(keys.adds_of_any(key));
  others.max_create_revision = upto;
  return {Op::count_prefix(keys.adds_of_one(key), upto), std::move(others)};
}

// The value a get answers: a set value, or a counter's total in decimal.
Status read_value(Backend::Impl& i, const std::string& key, std::optional<std::string>* value,
                  int64_t* revision) {
  Txn t;
  t.success = {Op::get(i.keys.kv(key))};
  for (Op& op : counter_reads(i.keys, key)) t.success.push_back(std::move(op));
  TxnResult r;
  if (Status s = i.etcd->txn(t, i.after(i.opt.request_timeout), &r); !s.ok()) return s;
  *revision = r.revision;
  value->reset();
  if (const auto& kvs = r.responses.at(0).range.kvs; !kvs.empty()) {
    *value = kvs.front().value;
  } else if (const Tally c = tally(r.responses.at(1).range, r.responses.at(2).range); c.exists) {
    *value = wide_text(c.total);
  }
  return Status::success();
}

// The two watches that see `key` arrive: a set, or the first add.
void watch_arrival(const Keys& keys, const std::string& key, int64_t from,
                   std::vector<WatchSpec>* specs) {
  WatchSpec set;
  set.key = keys.kv(key);
  set.start_revision = from;
  set.no_delete = true;
  WatchSpec added = set;
  added.key = keys.adds(key);
  added.range_end = prefix_end(added.key);
  specs->push_back(std::move(set));
  specs->push_back(std::move(added));
}

}  // namespace

// One transaction: the value, and every add made since, go.
Status Backend::set(const std::string& key, std::span<const uint8_t> value) {
  Impl& i = *impl_;
  Txn t;
  t.success = {Op::put(i.keys.kv(key), as_string(value)), Op::del_prefix(i.keys.adds(key))};
  TxnResult r;
  return i.etcd->txn(t, i.after(i.opt.request_timeout), &r);
}

Status Backend::get(const std::string& key, std::vector<uint8_t>* value, uint32_t timeout_ms) {
  Impl& i = *impl_;
  const auto start = Clock::now();
  const std::string job = quote(i.opt.job_id);
  std::optional<std::string> found;
  int64_t revision = 0;
  if (Status s = read_value(i, key, &found, &revision); !s.ok()) return s;
  if (!found && timeout_ms == 0)
    return make_status(CC_ERR_TIMEOUT, "key " + quote(key) + " is not set in job " + job +
                                           " (get without waiting)");
  // Woken by a set (its value comes with the event) or by an add (the total
  // is read once more); a key deleted again before that read is waited for
  // again. Each round follows a write to this key, so it ends at the deadline.
  while (!found) {
    std::vector<WatchSpec> specs;
    watch_arrival(i.keys, key, revision + 1, &specs);
    bool added = false;
    Status s = i.etcd->watch(specs, start + milliseconds(timeout_ms), nullptr,
                             [&](const std::vector<WatchEvent>& evs, int64_t) {
                               if (evs.front().spec == 0)
                                 found = evs.front().kv.value;
                               else
                                 added = true;
                               return false;
                             });
    if (s.code == CC_ERR_TIMEOUT)
      return make_status(CC_ERR_TIMEOUT,
                         "key " + quote(key) + " of job " + job + " was not set within " +
                             std::to_string(timeout_ms) +
                             " ms; check that the rank that sets it is running and uses the same "
                             "job id and rendezvous server");
    if (!s.ok()) return s;
    if (added)
      if (Status r = read_value(i, key, &found, &revision); !r.ok()) return r;
  }
  if (value != nullptr) *value = as_bytes(*found);
  return Status::success();
}

Status Backend::add(const std::string& key, int64_t delta, int64_t* result) {
  Impl& i = *impl_;
  const Deadline deadline = i.after(i.opt.request_timeout);
  const std::string k = i.keys.kv(key);
  const std::string op_id = i.next_op_id();
  const std::string one = i.keys.adds_of_one(key) + op_id;
  const std::string any = i.keys.adds_of_any(key) + op_id;
  const std::string where = "add on key " + quote(key) + " of job " + quote(i.opt.job_id);
  const auto overflow = [&](Wide before) {
    return make_status(CC_ERR_INVALID_ARGUMENT, where + ": " + wide_text(before) + " + " +
                                                    std::to_string(delta) +
                                                    " overflows a 64-bit integer");
  };
  // This add's key was applied by an earlier copy of a request whose answer
  // was lost: the result is the total of the adds up to it.
  const auto applied_at = [&](int64_t revision) -> Status {
    Txn t;
    t.success = counter_reads(i.keys, key, revision);
    TxnResult r;
    if (Status s = i.etcd->txn(t, deadline, &r); !s.ok()) return s;
    const Wide total = tally(r.responses.at(0).range, r.responses.at(1).range).total;
    if (result != nullptr) *result = static_cast<int64_t>(total);
    return Status::success();
  };
  // More than one round only when a set value is taken over (below) by
  // several adds at once, or set or deleted meanwhile.
  for (;;) {
    Txn t;
    t.compare = {Compare::absent(k), Compare::absent(one), Compare::absent(any)};
    t.success = {Op::put(delta == 1 ? one : any, std::to_string(delta))};
    for (Op& op : counter_reads(i.keys, key)) t.success.push_back(std::move(op));
    t.failure = {Op::get(k), Op::get(one), Op::get(any)};
    TxnResult r;
    if (Status s = i.etcd->txn(t, deadline, &r); !s.ok()) return s;
    if (r.succeeded) {
      const Wide total = tally(r.responses.at(1).range, r.responses.at(2).range).total;
      if (!fits(total)) {  // taken back: the key keeps its total
        Txn undo;
        Compare mine = Compare::absent(delta == 1 ? one : any);
        mine.number = r.revision;
        undo.compare = {mine};
        undo.success = {Op::del(mine.key)};
        TxnResult u;
        if (Status s = i.etcd->txn(undo, deadline, &u); !s.ok()) return s;
        return overflow(total - delta);
      }
      if (result != nullptr) *result = static_cast<int64_t>(total);
      return Status::success();
    }
    for (size_t j : {size_t{1}, size_t{2}})
      if (const auto& mine = r.responses.at(j).range.kvs; !mine.empty())
        return applied_at(mine.front().create_revision);
    if (Clock::now() >= deadline)
      return make_status(CC_ERR_TIMEOUT, where + ": other writers kept changing it for " +
                                             std::to_string(i.opt.request_timeout.count()) + " ms");
    const auto& set_kvs = r.responses.at(0).range.kvs;
    if (set_kvs.empty()) continue;  // the set value went meanwhile
    // A value put by set: a decimal one becomes the counter's first add
    // (with this delta), in one transaction that holds while it is unchanged.
    const KeyValue& cur = set_kvs.front();
    const auto value = parse_int64(cur.value);
    if (!value)
      return make_status(
          CC_ERR_INVALID_ARGUMENT,
          where +
              ": its value is not a decimal integer (it was set by set, not add); use another key");
    int64_t next = 0;
    if (__builtin_add_overflow(*value, delta, &next)) return overflow(*value);
    Txn take;
    take.compare = {Compare::mod_revision_is(k, cur.mod_revision), Compare::absent(any)};
    take.success = {Op::del(k), Op::put(any, std::to_string(next))};
    take.failure = {Op::get(any)};
    TxnResult tr;
    if (Status s = i.etcd->txn(take, deadline, &tr); !s.ok()) return s;
    if (tr.succeeded) {
      if (result != nullptr) *result = next;
      return Status::success();
    }
    if (const auto& mine = tr.responses.at(0).range.kvs; !mine.empty())
      return applied_at(mine.front().create_revision);
  }
}

Status Backend::wait(const std::vector<std::string>& keys, uint32_t timeout_ms) {
  Impl& i = *impl_;
  const auto start = Clock::now();
  std::vector<std::string> unique;
  {
    std::unordered_set<std::string> seen;
    for (const auto& k : keys)
      if (seen.insert(k).second) unique.push_back(k);
  }
  // One read per 64 keys (each: its set value, and whether any add was made),
  // then one watch from the read's revision: nothing is polled or read again.
  std::vector<std::string> missing;
  int64_t from = 0;
  for (size_t b = 0; b < unique.size(); b += kWaitBatch) {
    Txn t;
    const size_t end = std::min(unique.size(), b + kWaitBatch);
    for (size_t j = b; j < end; ++j) {
      t.success.push_back(Op::get(i.keys.kv(unique[j])));
      t.success.push_back(Op::count_prefix(i.keys.adds(unique[j])));
    }
    TxnResult r;
    if (Status s = i.etcd->txn(t, i.after(i.opt.request_timeout), &r); !s.ok()) return s;
    from = from == 0 ? r.revision : std::min(from, r.revision);
    for (size_t j = b; j < end; ++j) {
      const size_t at = 2 * (j - b);
      if (r.responses.at(at).range.kvs.empty() && r.responses.at(at + 1).range.count == 0)
        missing.push_back(unique[j]);
    }
  }
  if (missing.empty()) return Status::success();
  const std::string job = quote(i.opt.job_id);
  if (timeout_ms == 0)
    return make_status(CC_ERR_TIMEOUT,
                       "wait on job " + job + " without waiting: not set: " + key_list(missing));
  std::vector<WatchSpec> specs;
  for (const auto& k : missing) watch_arrival(i.keys, k, from + 1, &specs);
  std::vector<bool> arrived(missing.size(), false);
  size_t left = missing.size();
  Status s = i.etcd->watch(specs, start + milliseconds(timeout_ms), nullptr,
                           [&](const std::vector<WatchEvent>& evs, int64_t) {
                             for (const WatchEvent& e : evs)
                               if (!arrived[e.spec / 2]) {
                                 arrived[e.spec / 2] = true;
                                 --left;
                               }
                             return left > 0;
                           });
  if (s.code == CC_ERR_TIMEOUT) {
    std::vector<std::string> still;
    for (size_t j = 0; j < missing.size(); ++j)
      if (!arrived[j]) still.push_back(missing[j]);
    return make_status(
        CC_ERR_TIMEOUT,
        "wait on job " + job + " timed out after " + std::to_string(timeout_ms) +
            " ms; still missing: " + key_list(still) +
            "; check that the ranks that set them are running and use the same job id");
  }
  return s;
}

Status Backend::del(const std::string& key) {
  Impl& i = *impl_;
  Txn t;
  t.success = {Op::del(i.keys.kv(key)), Op::del(i.keys.writer(key)),
               Op::del_prefix(i.keys.adds(key))};
  TxnResult r;
  return i.etcd->txn(t, i.after(i.opt.request_timeout), &r);
}

Status Backend::compare_set(const std::string& key, const std::vector<uint8_t>* expected,
                            std::span<const uint8_t> desired, bool* swapped) {
  Impl& i = *impl_;
  const std::string k = i.keys.kv(key);
  const std::string w = i.keys.writer(key);
  const std::string op_id = i.next_op_id();
  Txn t;
  if (expected != nullptr)
    t.compare = {Compare::value_is(k, std::string(expected->begin(), expected->end()))};
  else  // absent: neither set nor added to
    t.compare = {Compare::absent(k), Compare::none_under(i.keys.adds(key))};
  t.success = {Op::put(k, as_string(desired)), Op::put(w, op_id)};
  t.failure = {Op::get(k), Op::get(w)};
  TxnResult r;
  if (Status s = i.etcd->txn(t, i.after(i.opt.request_timeout), &r); !s.ok()) return s;
  bool done = r.succeeded;
  if (!done) {
    // An attempt whose answer was lost (and was sent again elsewhere) did it.
    const auto& kvs = r.responses.at(0).range.kvs;
    const auto& marks = r.responses.at(1).range.kvs;
    done = !kvs.empty() && !marks.empty() && marks.front().value == op_id &&
           marks.front().mod_revision == kvs.front().mod_revision;
  }
  if (swapped != nullptr) *swapped = done;
  return Status::success();
}

}  // namespace cc::rv::etcd
