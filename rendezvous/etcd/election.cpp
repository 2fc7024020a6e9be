#include "rendezvous/etcd/election.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "common/log.hpp"
#include "rendezvous/etcd/keys.hpp"

namespace cc::rv::etcd {
namespace {

using std::chrono::milliseconds;

// A leader counts itself deposed this long before its lease could end, so
// it stops before the next candidate can have won.
constexpr milliseconds kLeaseMargin{500};

int64_t ttl_seconds(milliseconds lease) { return std::max<int64_t>(1, (lease.count() + 999) / 1000); }

class EtcdLeadership final : public Leadership {
 public:
  EtcdLeadership(std::shared_ptr<Client> client, const ElectionOptions& options, std::string scope,
                 int64_t lease, int64_t granted_ttl_s, int64_t created, Clock::time_point asked)
      : client_(std::move(client)),
        options_(options),
        scope_(std::move(scope)),
        leader_key_(keys::leader(options.prefix, scope_)),
        fence_key_(keys::fence(options.prefix, scope_)),
        lease_(lease),
        ttl_(milliseconds(granted_ttl_s * 1000)),
        created_(created) {
    valid_until_ = asked + ttl_ - kLeaseMargin;
    keeper_ = std::thread([this] { keep(); });
  }

  ~EtcdLeadership() override { resign(); }

  bool leading() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return !lost_ && Clock::now() < valid_until_;
  }

  void on_lost(std::function<void()> callback) override {
    std::lock_guard<std::mutex> lock(mu_);
    on_lost_ = std::move(callback);
  }

  void resign() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      lost_ = true;
    }
    cv_.notify_all();
    if (keeper_.joinable()) keeper_.join();
    // The key goes with the lease, so the next candidate wins at once.
    (void)client_->lease_revoke(lease_, Clock::now() + options_.request_timeout);
  }

  Status write(const DurableWrite& w) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    Txn t = fenced();
    const std::string key = keys::kv(options_.prefix, w.job, w.key);
    if (w.value) {
      t.success.push_back(Op::put(key, std::string(w.value->begin(), w.value->end())));
    } else {
      t.success.push_back(Op::del(key));
    }
    const std::string record = fmt::format("{} {}", w.request_id, w.answer);
    if (!w.session.empty())
      t.success.push_back(Op::put(keys::session(options_.prefix, w.job, w.session), record));
    return commit(t, w.session.empty() ? std::string() : keys::session(options_.prefix, w.job, w.session),
                  record);
  }

  Status forget_job(const std::string& job) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    Txn t = fenced();
    const std::string root = keys::job(options_.prefix, job);
    t.success.push_back(Op::del_prefix(root + "kv/"));
    t.success.push_back(Op::del_prefix(root + "session/"));
    return commit(t, {}, {});
  }

  Status load(const std::function<void(const DurableWrite& key)>& on_key,
              const std::function<void(const DurableSession& s)>& on_session) override {
    RangeResult r;
    const std::string root = keys::jobs(options_.prefix, scope_);
    if (Status s = client_->range(root, prefix_end(root), deadline(), &r); !s.ok()) return s;
    for (const KeyValue& kv : r.kvs) {
      std::optional<keys::Parsed> p = keys::parse(options_.prefix, kv.key);
      if (!p) continue;
      if (p->kind == keys::Parsed::Kind::kv) {
        DurableWrite w;
        w.job = p->job;
        w.key = p->name;
        w.value = std::vector<uint8_t>(kv.value.begin(), kv.value.end());
        on_key(w);
        continue;
      }
      DurableSession s;
      s.job = p->job;
      s.session = p->name;
      if (!parse_record(kv.value, &s.request_id, &s.answer)) continue;
      on_session(s);
    }
    return Status::success();
  }

  std::string where() const override { return client_->where(); }

 private:
  Deadline deadline() const { return Clock::now() + options_.request_timeout; }

  static bool parse_record(const std::string& text, uint32_t* rid, int64_t* answer) {
    const size_t space = text.find(' ');
    if (space == std::string::npos) return false;
    const char* b = text.data();
    auto r1 = std::from_chars(b, b + space, *rid);
    auto r2 = std::from_chars(b + space + 1, b + text.size(), *answer);
    return r1.ec == std::errc() && r2.ec == std::errc();
  }

  // A transaction that holds only for this leader, after its own last write.
  Txn fenced() const {
    Txn t;
    Compare mine;
    mine.key = leader_key_;
    mine.target = Compare::Target::create;
    mine.number = created_;
    t.compare.push_back(mine);
    t.compare.push_back(Compare::mod_revision_is(fence_key_, fence_revision_));
    t.success.push_back(Op::put(fence_key_, ""));
    t.failure.push_back(Op::get(leader_key_));
    t.failure.push_back(Op::get(fence_key_));
    return t;
  }

  Status deposed(const std::string& why) {
    lose(why);
    return make_status(CC_ERR_RENDEZVOUS,
                       fmt::format("this rendezvous server no longer leads (in {}): {}; the write "
                                   "was not kept. Clients reconnect to the next leader",
                                   client_->where(), why));
  }

  // Sends the transaction until etcd answers it or the deadline; a copy
  // whose answer was lost is recognised by the session's record (or, with
  // none, by the fence having moved while the leader key stayed ours).
  Status commit(Txn t, const std::string& session_key, const std::string& record) {
    const Deadline until = deadline();
    Status last;
    while (Clock::now() < until) {
      if (!leading()) return deposed("its lease in etcd ended or was not renewed in time");
      TxnResult r;
      last = client_->txn(t, until, &r);
      if (last.ok() && r.succeeded) {
        fence_revision_ = r.revision;
        return Status::success();
      }
      if (last.ok()) {
        // The leader key or the fence differs: who changed it?
        const auto& leader = r.responses.size() > 0 ? r.responses[0].range.kvs : std::vector<KeyValue>{};
        if (leader.empty() || leader[0].create_revision != created_)
          return deposed("another candidate holds the leader key");
        const auto& fence = r.responses[1].range.kvs;
        const int64_t now_at = fence.empty() ? 0 : fence[0].mod_revision;
        if (!session_key.empty()) {
          std::optional<KeyValue> kept;
          int64_t rev = 0;
          if (Status s = client_->get(session_key, until, &kept, &rev); !s.ok()) {
            last = s;
            continue;
          }
          if (kept && kept->value == record && kept->mod_revision == now_at) {
            fence_revision_ = now_at;  // an earlier copy of this very write landed
            return Status::success();
          }
        }
        // Only this leader writes the fence: a copy of an earlier write of
        // ours landed after all. Go on from where it left the fence.
        fence_revision_ = now_at;
        t.compare[1] = Compare::mod_revision_is(fence_key_, fence_revision_);
        continue;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    return make_status(last.ok() ? CC_ERR_TIMEOUT : last.code,
                       fmt::format("the rendezvous server could not keep a store write in {} "
                                   "within {} ms: {}; check the etcd cluster",
                                   client_->where(), options_.request_timeout.count(),
                                   last.ok() ? "no answer" : last.message));
  }

  void lose(const std::string& why) {
    std::function<void()> tell;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (told_ || stopping_) return;
      lost_ = true;
      told_ = true;
      tell = on_lost_;
    }
    log().warn("rendezvous leadership of {} lost: {}", scope_.empty() ? "the daemons" : "job " + scope_,
               why);
    if (tell) tell();
  }

  // The keeper thread: a renewal every third of the TTL, retried within
  // 250 ms while it fails, until the lease may have ended.
  void keep() {
    std::unique_lock<std::mutex> lock(mu_);
    Clock::time_point next = Clock::now() + ttl_ / 3;
    while (!stopping_) {
      cv_.wait_until(lock, next, [this] { return stopping_; });
      if (stopping_) return;
      lock.unlock();
      const Clock::time_point asked = Clock::now();
      int64_t ttl_s = 0;
      Status s = client_->lease_keepalive(lease_, asked + ttl_ / 3, &ttl_s);
      lock.lock();
      if (stopping_) return;
      if (s.ok() && ttl_s > 0) {
        valid_until_ = asked + milliseconds(ttl_s * 1000) - kLeaseMargin;
        next = Clock::now() + ttl_ / 3;
        continue;
      }
      const bool gone = s.ok();  // etcd answered: the lease is no more
      if (gone || Clock::now() >= valid_until_) {
        lock.unlock();
        lose(gone ? "etcd says its lease has ended" : "its lease could not be renewed: " + s.message);
        lock.lock();
        return;
      }
      next = Clock::now() + milliseconds(250);
    }
  }

  std::shared_ptr<Client> client_;
  ElectionOptions options_;
  std::string scope_, leader_key_, fence_key_;
  int64_t lease_ = 0;
  milliseconds ttl_;
  int64_t created_ = 0;
  std::mutex write_mu_;
  int64_t fence_revision_ = 0;  // under write_mu_; 0 until the first write reads it
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point valid_until_;
  bool lost_ = false, told_ = false, stopping_ = false;
  std::function<void()> on_lost_;
  std::thread keeper_;

  friend class EtcdElection;
};

class EtcdElection final : public Election {
 public:
  EtcdElection(std::shared_ptr<Client> client, ElectionOptions options)
      : client_(std::move(client)), options_(std::move(options)) {}

  Status leader(const std::string& scope, ElectionDeadline deadline, std::string* address) override {
    std::optional<KeyValue> kv;
    int64_t revision = 0;
    if (Status s = client_->get(keys::leader(options_.prefix, scope), deadline, &kv, &revision); !s.ok())
      return s;
    *address = kv ? kv->value : std::string();
    return Status::success();
  }

  Status campaign(const std::string& scope, const std::string& address, ElectionDeadline deadline,
                  std::unique_ptr<Leadership>* won) override {
    won->reset();
    const Clock::time_point asked = Clock::now();
    int64_t lease = 0, granted = 0;
    if (Status s = client_->lease_grant(ttl_seconds(options_.lease), deadline, &lease, &granted); !s.ok())
      return s;
    const std::string key = keys::leader(options_.prefix, scope);
    const std::string fence = keys::fence(options_.prefix, scope);
    Txn t;
    t.compare.push_back(Compare::absent(key));
    t.success.push_back(Op::put(key, address, lease));
    t.success.push_back(Op::get(fence));
    TxnResult r;
    if (Status s = client_->txn(t, deadline, &r); !s.ok()) {
      (void)client_->lease_revoke(lease, deadline);
      return s;
    }
    if (!r.succeeded) {
      (void)client_->lease_revoke(lease, deadline);
      return Status::success();
    }
    auto held = std::make_unique<EtcdLeadership>(client_, options_, scope, lease, granted,
                                                 r.revision, asked);
    const auto& fence_kvs = r.responses.size() > 1 ? r.responses[1].range.kvs : std::vector<KeyValue>{};
    held->fence_revision_ = fence_kvs.empty() ? 0 : fence_kvs[0].mod_revision;
    log().info("rendezvous: {} leads {} in {} (lease {} s)", address,
               scope.empty() ? "the daemons" : "job " + scope, client_->where(), granted);
    *won = std::move(held);
    return Status::success();
  }

  Status daemons_serve(ElectionDeadline deadline, bool* yes) override {
    std::optional<KeyValue> kv;
    int64_t revision = 0;
    if (Status s = client_->get(keys::daemons(options_.prefix), deadline, &kv, &revision); !s.ok())
      return s;
    *yes = kv.has_value();
    return Status::success();
  }

  Status declare_daemons(ElectionDeadline deadline) override {
    return client_->put(keys::daemons(options_.prefix), "cc-rendezvous", 0, deadline);
  }

  std::string where() const override { return client_->where(); }
  milliseconds lease() const override { return milliseconds(ttl_seconds(options_.lease) * 1000); }

 private:
  std::shared_ptr<Client> client_;
  ElectionOptions options_;
};

}  // namespace

Status open_election(const ElectionOptions& options, Deadline deadline,
                     std::unique_ptr<Election>* out) {
  std::unique_ptr<Client> client;
  if (Status s = Client::create(options.client, &client); !s.ok()) return s;
  if (Status s = client->check(deadline); !s.ok()) return s;
  *out = std::make_unique<EtcdElection>(std::shared_ptr<Client>(std::move(client)), options);
  return Status::success();
}

}  // namespace cc::rv::etcd
