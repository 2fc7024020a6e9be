#include "rendezvous/etcd/node_link.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "rendezvous/etcd/node_lines.hpp"
#include "rendezvous/etcd/wire.hpp"

namespace cc::rv::etcd::node {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds kCancelPoll{20};  // how soon a cancelled watch lets go
constexpr size_t kMaxLine = 64 << 20;    // an answer with every member (rank 0's claim)

}  // namespace

struct Link::Impl {
  std::string path;
  int fd = -1;
  std::thread reader;

  std::mutex write_mu;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool gone = false;
  std::string gone_why;
  Clock::time_point heard = Clock::now();
  uint64_t next_id = 1;
  std::map<uint64_t, std::optional<json>> replies;                  // awaited answers
  std::map<uint64_t, std::deque<std::vector<WatchEvent>>> streams;  // open watches
  std::function<void(const std::string&)> lost;
  std::function<void(int64_t)> lease_lost;

  void send(const json& j) {
    std::lock_guard<std::mutex> lock(write_mu);
    (void)write_line(fd, j);  // false: the agent is gone, the reader sees the end
  }

  std::string gone_words() const {
    return "cc-run's node agent (socket " + path + ") is gone" +
           (gone_why.empty() ? std::string() : ": " + gone_why) +
           " (cc-run exited or was killed; its node's ranks lost their rendezvous)";
  }

  // Sends a request and waits for its answer.
  Status ask(json request, Deadline deadline, json* answer) {
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (gone) return make_status(CC_ERR_RENDEZVOUS, gone_words());
      id = next_id++;
      replies[id];
    }
    request["id"] = id;
    send(request);
    std::unique_lock<std::mutex> lock(mu);
    const bool came =
        cv.wait_until(lock, deadline, [&] { return gone || replies[id].has_value(); });
    std::optional<json> got = std::move(replies[id]);
    replies.erase(id);
    if (got) {
      *answer = std::move(*got);
      return Status::success();
    }
    if (gone) return make_status(CC_ERR_RENDEZVOUS, gone_words());
    (void)came;
    return make_status(CC_ERR_TIMEOUT,
                       "cc-run's node agent (socket " + path + ") did not answer in time");
  }

  void read_loop() {
    const std::string why = read_lines(fd, kMaxLine, [this](json m) {
      take(std::move(m));
      return true;
    });
    std::function<void(const std::string&)> observer;
    {
      std::lock_guard<std::mutex> lock(mu);
      gone = true;
      gone_why = why;
      observer = lost;
    }
    cv.notify_all();
    if (observer) observer(gone_words());
  }

  void take(json m) {
    if (m.contains("kept")) {
      std::lock_guard<std::mutex> lock(mu);
      heard = Clock::now();
      return;
    }
    if (m.contains("lease_lost")) {
      std::function<void(int64_t)> observer;
      {
        std::lock_guard<std::mutex> lock(mu);
        observer = lease_lost;
      }
      if (observer) observer(wire::num(m, "lease_lost"));
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (m.contains("watch")) {
      auto it = streams.find(m.value("watch", uint64_t{0}));
      if (it == streams.end()) return;
      std::vector<WatchEvent> evs;
      for (const json& e : m.value("events", json::array()))
        if (auto ev = parse_event(e)) evs.push_back(std::move(*ev));
      it->second.push_back(std::move(evs));
    } else {
      auto it = replies.find(m.value("id", uint64_t{0}));
      if (it == replies.end()) return;
      it->second = std::move(m);
    }
    cv.notify_all();
  }
};

Link::Link(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Status Link::connect(const std::string& path, std::unique_ptr<Link>* out) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path))
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "the node agent's socket path '" + path + "' is too long");
  std::memcpy(addr.sun_path, path.data(), path.size());
  impl->fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (impl->fd < 0 || ::connect(impl->fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string why = std::strerror(errno);
    if (impl->fd >= 0) ::close(impl->fd);
    return make_status(CC_ERR_RENDEZVOUS,
                       "cannot reach cc-run's node agent at " + path + " (CC_AGENT_SOCKET): " +
                           why + "; run the rank under cc-run, or unset CC_AGENT_SOCKET");
  }
  Impl* i = impl.get();
  out->reset(new Link(std::move(impl)));
  i->reader = std::thread([i] { i->read_loop(); });
  return Status::success();
}

Link::~Link() {
  ::shutdown(impl_->fd, SHUT_RDWR);
  if (impl_->reader.joinable()) impl_->reader.join();
  ::close(impl_->fd);
}

void Link::on_lost(std::function<void(const std::string&)> observer) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->lost = std::move(observer);
}

void Link::on_lease_lost(std::function<void(int64_t)> observer) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->lease_lost = std::move(observer);
}

bool Link::lost() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->gone;
}

Clock::time_point Link::last_heard() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->heard;
}

const std::string& Link::path() const { return impl_->path; }

Status Link::lease(Deadline deadline, int64_t* id, int64_t* ttl_s, std::string* node) {
  json answer;
  if (Status s = impl_->ask(json{{"op", "lease"}}, deadline, &answer); !s.ok()) return s;
  *id = wire::num(answer, "lease");
  *ttl_s = wire::num(answer, "ttl");
  *node = wire::text(answer, "node");
  if (*id == 0)
    return make_status(CC_ERR_RENDEZVOUS,
                       "cc-run's node agent (socket " + impl_->path + ") has no lease on etcd");
  return Status::success();
}

Status Link::claim(const Txn& t, Deadline deadline, TxnResult* out) {
  each_leased_put(t, [this](const std::string& key) { own(key); });
  json answer;
  if (Status s = impl_->ask(json{{"op", "claim"}, {"txn", wire::txn_json(t)}}, deadline, &answer);
      !s.ok())
    return s;
  if (answer.contains("error"))
    return make_status(static_cast<cc_result_t>(answer.value("code", int(CC_ERR_RENDEZVOUS))),
                       wire::text(answer, "error"));
  try {
    *out = wire::parse_txn(answer.at("answer"));
  } catch (const std::exception& e) {
    return make_status(
        CC_ERR_RENDEZVOUS,
        std::string("cc-run's node agent sent an answer we cannot read: ") + e.what());
  }
  return Status::success();
}

Status Link::watch(const std::vector<WatchSpec>& specs, Deadline deadline, WatchCancel* cancel,
                   const Client::OnEvents& on_events) {
  Impl& i = *impl_;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    if (i.gone) return make_status(CC_ERR_RENDEZVOUS, i.gone_words());
    id = i.next_id++;
    i.streams[id];
  }
  json list = json::array();
  for (const WatchSpec& s : specs) list.push_back(spec_json(s));
  i.send(json{{"op", "watch"}, {"id", id}, {"specs", std::move(list)}});
  Status result = Status::success();
  std::unique_lock<std::mutex> lock(i.mu);
  for (;;) {
    auto& queue = i.streams[id];
    if (!queue.empty()) {
      std::vector<WatchEvent> evs = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      const bool more = on_events(evs, 0);
      lock.lock();
      if (!more) break;
      continue;
    }
    if (cancel != nullptr && cancel->cancelled()) {
      result = make_status(CC_ERR_ABORTED, "the watch was cancelled");
      break;
    }
    if (i.gone) {
      result = make_status(CC_ERR_RENDEZVOUS, i.gone_words());
      break;
    }
    if (Clock::now() >= deadline) {
      result = make_status(CC_ERR_TIMEOUT, "no event before the deadline");
      break;
    }
    i.cv.wait_until(lock, std::min(deadline, Clock::now() + kCancelPoll));
  }
  i.streams.erase(id);
  const bool gone = i.gone;
  lock.unlock();
  if (!gone) i.send(json{{"op", "unwatch"}, {"id", id}});
  return result;
}

void Link::own(const std::string& key) {
  impl_->send(json{{"op", "own"}, {"key", wire::b64(key)}});
}

void Link::member(const Membership& m) {
  json j = membership_json(m);
  j["op"] = "member";
  impl_->send(j);
}

void Link::left(const std::string& generation) {
  impl_->send(json{{"op", "left"}, {"gen", wire::b64(generation)}});
}

void Link::ended(const std::string& generation) {
  impl_->send(json{{"op", "ended"}, {"gen", wire::b64(generation)}});
}

}  // namespace cc::rv::etcd::node
