// cc-rendezvous-bench --abuse and --core-events (abuse.hpp). The healthy job
// runs on its own thread over non-blocking sockets and poll: each member
// sends a heartbeat 20 ms after its previous one was answered, and every
// answer's distance from the previous answer to the same member is a gap.
// The abuses run one after the other on the main thread with blocking
// sockets, each bounded in connections, requests and time.
#include "tools/cc-rendezvous-bench/abuse.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/connect_by.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/server.hpp"
#include "rendezvous/server_core.hpp"
#include "tools/cc-rendezvous-bench/child_server.hpp"

namespace cc::tools::rendezvous_bench {
namespace {

namespace rv = cc::rv;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kHeartbeatEvery = 20ms;
constexpr double kGapGoalMs = 100;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// ---- a blocking client -------------------------------------------------------

// A blocking socket connected to the server on 127.0.0.1:port within 5 s
// (through rendezvous/connect_by, as every cc client connects), else -1.
int connect_to(int port) {
  cc::UniqueFd fd;
  const asio::ip::tcp::endpoint server(asio::ip::address_v4::loopback(),
                                       static_cast<unsigned short>(port));
  if (rv::connect_by(server, rv::ConnectClock::now() + 5s, &fd) != 0) return -1;
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) return -1;
  return fd.release();
}

bool send_all(int fd, const std::vector<uint8_t>& b, size_t from = 0, size_t n = SIZE_MAX) {
  n = std::min(n, b.size() - from);
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::send(fd, b.data() + from + done, n - done, MSG_NOSIGNAL);
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

// Reads frames until `want` came, the connection closed or the deadline
// passed; returns how many came.
size_t read_frames(int fd, rv::FrameReader& reader, size_t want, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  size_t got = 0;
  std::vector<uint8_t> buf(1 << 16);
  while (got < want) {
    while (got < want && reader.next()) ++got;
    if (got >= want || reader.error() != rv::DecodeError::none) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) break;
    reader.feed(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
  }
  return got;
}

// A connection to `job` that said hello; -1 when that failed.
int client(int port, const std::string& job) {
  const int fd = connect_to(port);
  if (fd < 0) return -1;
  rv::FrameReader r;
  if (!send_all(fd, rv::encode_frame(1, rv::Hello{job, "abuser", 1, "cc-rendezvous-bench"})) ||
      read_frames(fd, r, 1, 5s) != 1) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void close_all(std::vector<int>& fds) {
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  fds.clear();
}

// The process's resident memory in KiB (0 when unknown).
long rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

// ---- the healthy job ---------------------------------------------------------

struct Phase {
  std::vector<double> gaps_ms;
  double worst_round_trip_ms = 0;
  long peak_rss_kib = 0;
};

class HealthyJob {
 public:
  HealthyJob(int port, int members, pid_t server) : port_(port), n_(members), server_(server) {}
  ~HealthyJob() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto& m : members_)
      if (m.fd >= 0) ::close(m.fd);
  }

  // Connects, joins one generation of `n` ranks and starts heartbeating.
  bool start() {
    members_.resize(static_cast<size_t>(n_));
    for (int i = 0; i < n_; ++i) {
      Member& m = members_[static_cast<size_t>(i)];
      m.fd = client(port_, "healthy");
      if (m.fd < 0) return false;
      rv::Join j;
      j.info.rank = i;
      j.info.world_size = n_;
      j.info.host = "healthy-" + std::to_string(i / 8);
      j.info.pid = static_cast<uint32_t>(1000 + i);
      j.info.nccl_version = 22809;
      if (i == 0) j.unique_id = {1, 2, 3};
      j.timeout_ms = 60000;
      if (!send_all(m.fd, rv::encode_frame(2, j))) return false;
    }
    for (auto& m : members_) {
      if (read_frames(m.fd, m.reader, 1, 30s) != 1) return false;
      if (!send_all(m.fd, rv::encode_frame(3, rv::HeartbeatWindow{6000})) ||
          read_frames(m.fd, m.reader, 1, 5s) != 1)
        return false;
    }
    thread_ = std::thread([this] { loop(); });
    return true;
  }

  // From now on gaps count for a new phase; returns the one that ended.
  Phase next_phase() {
    std::lock_guard<std::mutex> lock(mu_);
    Phase done = std::move(current_);
    current_ = Phase{};
    return done;
  }
  bool lost() const { return lost_; }

 private:
  struct Member {
    int fd = -1;
    rv::FrameReader reader;
    Clock::time_point last_ack{};
    Clock::time_point sent{};
    bool waiting = false;
  };

  void loop() {
    std::vector<pollfd> polls(members_.size());
    for (size_t i = 0; i < members_.size(); ++i) polls[i] = {members_[i].fd, POLLIN, 0};
    std::vector<uint8_t> buf(1 << 16);
    const auto beat = rv::encode_frame(9, rv::Heartbeat{1});
    auto last_rss = Clock::now();
    const auto begin = Clock::now();
    for (auto& m : members_) m.last_ack = begin;
    while (!stop_) {
      const auto now = Clock::now();
      for (auto& m : members_) {
        if (m.waiting || now - m.last_ack < kHeartbeatEvery) continue;
        if (!send_all(m.fd, beat)) lost_ = true;
        m.sent = now;
        m.waiting = true;
      }
      ::poll(polls.data(), polls.size(), 2);
      for (size_t i = 0; i < members_.size(); ++i) {
        if (!(polls[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Member& m = members_[i];
        const ssize_t n = ::recv(m.fd, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n == 0) lost_ = true;
        if (n <= 0) continue;
        m.reader.feed(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
        while (auto f = m.reader.next()) {
          if (!std::holds_alternative<rv::HeartbeatAck>(f->message)) {
            lost_ = true;  // a peer event or an error: the job was hurt
            continue;
          }
          const auto at = Clock::now();
          std::lock_guard<std::mutex> lock(mu_);
          current_.gaps_ms.push_back(
              std::chrono::duration<double, std::milli>(at - m.last_ack).count());
          current_.worst_round_trip_ms =
              std::max(current_.worst_round_trip_ms,
                       std::chrono::duration<double, std::milli>(at - m.sent).count());
          m.last_ack = at;
          m.waiting = false;
        }
      }
      if (Clock::now() - last_rss > 50ms) {
        last_rss = Clock::now();
        const long rss = rss_kib(server_);
        std::lock_guard<std::mutex> lock(mu_);
        current_.peak_rss_kib = std::max(current_.peak_rss_kib, rss);
      }
    }
  }

  int port_;
  int n_;
  pid_t server_;
  std::vector<Member> members_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> lost_{false};
  std::mutex mu_;
  Phase current_;
};

void report(const char* name, Phase p, bool* goal_met) {
  std::sort(p.gaps_ms.begin(), p.gaps_ms.end());
  const double worst = p.gaps_ms.empty() ? 0 : p.gaps_ms.back();
  const double p99 = p.gaps_ms.empty() ? 0 : p.gaps_ms[p.gaps_ms.size() * 99 / 100];
  const bool met = !p.gaps_ms.empty() && worst <= kGapGoalMs;
  *goal_met = *goal_met && met;
  std::printf(
      "%-34s heartbeats %7zu  gap p99 %6.1f ms  max %7.1f ms  round trip max %7.1f ms  "
      "server RSS peak %6.1f MiB%s\n",
      name, p.gaps_ms.size(), p99, worst, p.worst_round_trip_ms, p.peak_rss_kib / 1024.0,
      met ? "" : "  (over the 100 ms goal)");
  std::fflush(stdout);
}

// ---- the abuses ----------------------------------------------------------------

// Requests each abusing connection parks: within the default limit of 4 MiB
// of parked requests per connection (each counts its key and 512 bytes).
constexpr size_t kParkedPerConn = 7500;
constexpr int kParkingConns = 12;  // 90,000 parked in one job: within its 64 MiB

std::vector<uint8_t> gets(const std::string& key, size_t n, uint32_t timeout_ms) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < n; ++i)
    rv::append_frame(out, static_cast<uint32_t>(i + 1), rv::Get{key, timeout_ms});
  return out;
}

// kParkingConns clients of `job`, each having sent what requests(c) gives
// the c-th (those that could not connect left out).
std::vector<int> parking_clients(int port, const std::string& job,
                                 const std::function<std::vector<uint8_t>(int)>& requests) {
  std::vector<int> fds;
  for (int c = 0; c < kParkingConns; ++c) {
    const int fd = client(port, job);
    if (fd < 0) continue;
    send_all(fd, requests(c));
    fds.push_back(fd);
  }
  return fds;
}

void parked_gets_closed(int port) {
  for (int round = 0; round < 3; ++round) {
    std::vector<int> fds = parking_clients(port, "abuse-close", [](int c) {
      return gets("never/" + std::to_string(c), kParkedPerConn, 60000);
    });
    std::this_thread::sleep_for(300ms);
    close_all(fds);  // all at once
    std::this_thread::sleep_for(300ms);
  }
}

void set_wakes_many(int port) {
  for (int round = 0; round < 3; ++round) {
    std::vector<int> fds = parking_clients(port, "abuse-wake",
                                           [](int) { return gets("wake", kParkedPerConn, 60000); });
    std::this_thread::sleep_for(300ms);
    const int setter = client(port, "abuse-wake");
    rv::FrameReader sr;
    send_all(setter, rv::encode_frame(1, rv::Set{"wake", {'g', 'o'}}));
    read_frames(setter, sr, 1, 10s);
    for (int fd : fds) {
      rv::FrameReader r;
      read_frames(fd, r, kParkedPerConn, 20s);
    }
    send_all(setter, rv::encode_frame(2, rv::Del{"wake"}));
    read_frames(setter, sr, 1, 10s);
    ::close(setter);
    close_all(fds);
  }
}

void waits_expire_together(int port) {
  for (int round = 0; round < 3; ++round) {
    std::vector<int> fds = parking_clients(port, "abuse-expire", [](int) {
      std::vector<uint8_t> waits;
      for (size_t i = 0; i < kParkedPerConn; ++i)
        rv::append_frame(waits, static_cast<uint32_t>(i + 1), rv::Wait{{"na", "nb"}, 1000});
      return waits;
    });
    for (int fd : fds) {
      rv::FrameReader r;
      read_frames(fd, r, kParkedPerConn, 20s);
    }
    close_all(fds);
  }
}

void big_replies_unread(int port) {
  std::vector<int> fds;
  for (int c = 0; c < 8; ++c) {
    const int fd = client(port, "abuse-hog-" + std::to_string(c));
    if (fd < 0) continue;
    rv::FrameReader r;
    send_all(fd, rv::encode_frame(1, rv::Set{"big", std::vector<uint8_t>(1u << 20, 7)}));
    read_frames(fd, r, 1, 10s);
    send_all(fd, gets("big", 60, 0));  // 60 MiB of replies, never read
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(1s);
  const std::vector<uint8_t> junk = {'G', 'E', 'T', ' '};
  for (int fd : fds) send_all(fd, junk);  // the server drops them, their replies unread
  std::this_thread::sleep_for(3s);        // past the drain timeout
  close_all(fds);
}

void oversized_hellos(int port) {
  std::vector<uint8_t> hello(rv::kHeaderSize + 16384, 'x');
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i)
      hello[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  };
  put32(0, rv::kMagic);
  hello[4] = static_cast<uint8_t>(rv::kProtocolVersion);
  hello[5] = 0;
  hello[6] = static_cast<uint8_t>(rv::MsgType::hello);
  hello[7] = 0;
  put32(8, 1);
  put32(12, 4u << 20);
  for (int round = 0; round < 10; ++round) {
    std::vector<int> fds;
    for (int c = 0; c < 100; ++c) {
      const int fd = connect_to(port);
      if (fd < 0) continue;
      send_all(fd, hello);
      fds.push_back(fd);
    }
    std::this_thread::sleep_for(200ms);
    close_all(fds);
  }
}

// Returns the frames answered, and whether the client was dropped.
// One hostile rank behind a node agent (a raw agent connection with two
// ranks): four pipelined Gets of a 1 MiB value, more than one frame holds,
// then 96 more left unread. What must hold: the agent's link stays, the
// hostile rank's channel ends with a message, its neighbour is answered.
struct AgentRankOutcome {
  bool link_kept = false;
  int big_answers = 0;  // of the four pipelined Gets
  std::string ended;    // why the hostile rank's channel ended
  bool neighbour_answered = false;
};

AgentRankOutcome hostile_rank_behind_agent(int port) {
  AgentRankOutcome out;
  const int fd = client(port, "abuse-agent");
  if (fd < 0) return out;
  auto relay = [&](uint32_t channel, rv::RelayOp op, std::vector<uint8_t> data) {
    rv::Relay r;
    r.entries.push_back({channel, op, std::move(data)});
    return send_all(fd, rv::encode_frame(0, r));
  };
  for (uint32_t ch : {1u, 2u})
    relay(ch, rv::RelayOp::open,
          rv::encode_frame(1, rv::Hello{"abuse-agent", "node", 10 + ch, "bench rank"}));
  relay(1, rv::RelayOp::frames,
        rv::encode_frame(2, rv::Set{"big", std::vector<uint8_t>(1u << 20, 7)}));
  // What the server says to each channel, read through the agent's relays.
  rv::FrameReader up;
  std::map<uint32_t, rv::FrameReader> ranks;
  std::map<uint32_t, std::string> closed;
  bool lost = false;
  auto pump = [&](std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    std::vector<uint8_t> buf(1 << 16);
    while (!lost && Clock::now() < deadline) {
      while (auto f = up.next()) {
        if (const auto* r = std::get_if<rv::Relay>(&f->message))
          for (const rv::RelayEntry& e : r->entries) {
            if (e.op == rv::RelayOp::frames) ranks[e.channel].feed(e.data);
            if (e.op == rv::RelayOp::close) closed[e.channel].assign(e.data.begin(), e.data.end());
          }
      }
      if (up.error() != rv::DecodeError::none) {
        lost = true;
        break;
      }
      pollfd p{fd, POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n <= 0) {
        lost = true;
        break;
      }
      up.feed(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
    }
  };
  auto count_values = [&](uint32_t channel) {
    int values = 0;
    while (auto f = ranks[channel].next()) {
      values += std::holds_alternative<rv::Value>(f->message) ? 1 : 0;
      if (const auto* e = std::get_if<rv::Error>(&f->message)) out.ended = e->message;
    }
    return values;
  };
  pump(2s);
  count_values(1);  // the Set's Ok
  relay(1, rv::RelayOp::frames, gets("big", 4, 0));
  for (int i = 0; i < 50 && out.big_answers < 4 && !lost; ++i) {
    pump(100ms);
    out.big_answers += count_values(1);
  }
  relay(1, rv::RelayOp::frames, gets("big", 96, 0));  // 96 MiB, unread for now
  std::this_thread::sleep_for(3s);
  for (int i = 0; i < 100 && closed.count(1) == 0 && !lost; ++i) {
    pump(100ms);
    count_values(1);
  }
  relay(2, rv::RelayOp::frames, rv::encode_frame(3, rv::Set{"k", {1}}));
  for (int i = 0; i < 50 && !out.neighbour_answered && !lost; ++i) {
    pump(100ms);
    while (auto f = ranks[2].next())
      out.neighbour_answered = out.neighbour_answered || std::holds_alternative<rv::Ok>(f->message);
  }
  out.link_kept = !lost;
  if (out.ended.empty() && closed.count(1)) out.ended = closed[1];
  ::close(fd);
  return out;
}

std::pair<int, bool> steady_pipeline(int port) {
  const int fd = client(port, "abuse-pipeline");
  if (fd < 0) return {0, true};
  constexpr int kFrames = 400;
  std::vector<uint8_t> stream;
  for (int i = 0; i < kFrames; ++i)
    rv::append_frame(stream, static_cast<uint32_t>(i + 1),
                     rv::Set{"k" + std::to_string(i % 7), std::vector<uint8_t>(100000, 1)});
  std::thread writer([&] {
    for (size_t at = 0; at < stream.size(); at += 16384) {
      if (!send_all(fd, stream, at, 16384)) return;
      std::this_thread::sleep_for(1ms);
    }
  });
  rv::FrameReader r;
  const size_t got = read_frames(fd, r, kFrames, 30s);
  writer.join();
  ::close(fd);
  return {static_cast<int>(got), got != static_cast<size_t>(kFrames)};
}

// ---- the core alone --------------------------------------------------------------

// Encodes what the core sends, as the I/O layer does, into a reused buffer.
class EncodingSink : public rv::Sink {
 public:
  void send(rv::ConnId, uint32_t request_id, const rv::Message& m) override {
    rv::append_frame(out_, request_id, m);
    ++sent;
    if (out_.size() > (1u << 20)) out_.clear();
  }
  void send_value(rv::ConnId, uint32_t request_id, std::span<const uint8_t> value) override {
    rv::append_value_frame(out_, request_id, value);
    ++sent;
    if (out_.size() > (1u << 20)) out_.clear();
  }
  void close(rv::ConnId, const std::string&) override {}
  size_t sent = 0;

 private:
  std::vector<uint8_t> out_;
};

struct Longest {
  double first_ms = 0;
  double longest_ms = 0;
  double median_ms = 0;
  int calls = 0;
};

// Times `first`, then expire(now) until nothing is due.
template <class Fn>
Longest time_calls(rv::ServerCore& core, Clock::time_point now, Fn first) {
  Longest l;
  auto t = Clock::now();
  first();
  l.first_ms = ms_since(t);
  std::vector<double> each{l.first_ms};
  while (core.next_deadline() && *core.next_deadline() <= now) {
    t = Clock::now();
    core.expire(now);
    each.push_back(ms_since(t));
  }
  l.calls = static_cast<int>(each.size());
  std::sort(each.begin(), each.end());
  l.longest_ms = each.back();
  l.median_ms = each[each.size() / 2];
  return l;
}

void print_longest(const char* what, int n, const Longest& l, size_t answers) {
  std::printf(
      "core: %-40s n=%d: %zu answers in %d calls: the first %.2f ms, median %.2f ms, longest "
      "%.2f ms\n",
      what, n, answers, l.calls, l.first_ms, l.median_ms, l.longest_ms);
}

}  // namespace

bool run_core_events(int n) {
  rv::ServerOptions o;
  o.max_parked_bytes_per_connection = size_t{1} << 30;
  o.max_parked_bytes_per_job = size_t{1} << 30;
  o.max_parked_bytes_total = size_t{1} << 30;
  auto now = Clock::now();
  auto feed = [&](rv::ServerCore& core, rv::ConnId id, const std::vector<uint8_t>& bytes) {
    core.on_bytes(id, bytes, now);
  };
  auto hello = [&](rv::ServerCore& core, rv::ConnId id) {
    core.on_connect(id, "127.0.0.1:" + std::to_string(id), now);
    feed(core, id, rv::encode_frame(1, rv::Hello{"job", "h", 1, "bench"}));
  };
  const size_t per = static_cast<size_t>(n);
  {
    EncodingSink sink;
    rv::ServerCore core(o, sink);
    hello(core, 1);
    hello(core, 2);
    feed(core, 1, gets("k", per, 60000));
    const size_t before = sink.sent;
    auto set = rv::encode_frame(5, rv::Set{"k", {'v'}});
    auto l = time_calls(core, now, [&] { feed(core, 2, set); });
    print_longest("one Set waking n waiters", n, l, sink.sent - before);
    auto t = Clock::now();
    feed(core, 1, gets("k2", per, 60000));
    std::printf("core: %-40s n=%d: %.2f ms\n", "parking n gets (one call)", n, ms_since(t));
    const auto closed = time_calls(core, now, [&] { core.on_disconnect(1, "end of stream", now); });
    print_longest("a connection closing with n parked gets", n, closed, 0);
  }
  {
    EncodingSink sink;
    rv::ServerCore core(o, sink);
    hello(core, 1);
    std::vector<uint8_t> waits;
    for (size_t i = 0; i < per; ++i)
      rv::append_frame(waits, static_cast<uint32_t>(i + 1), rv::Wait{{"a", "b"}, 1000});
    feed(core, 1, waits);
    const size_t before = sink.sent;
    now += 1000ms;
    auto l = time_calls(core, now, [&] { core.expire(now); });
    print_longest("n waits expiring together", n, l, sink.sent - before);
  }
  {
    // The hogs of --abuse: 8 connections, each asking for 60 Gets of a 1 MiB
    // value in one read.
    EncodingSink sink;
    rv::ServerCore core(o, sink);
    hello(core, 1);
    feed(core, 1, rv::encode_frame(2, rv::Set{"big", std::vector<uint8_t>(1u << 20, 7)}));
    for (rv::ConnId c = 2; c < 10; ++c) hello(core, c);
    const size_t before = sink.sent;
    auto l = time_calls(core, now, [&] {
      for (rv::ConnId c = 2; c < 10; ++c) feed(core, c, gets("big", 60, 0));
    });
    print_longest("8 connections' 60 Gets of 1 MiB", 8, l, sink.sent - before);
  }
  std::fflush(stdout);
  return true;
}

bool run_abuse(int members) {
  const ChildServer server = fork_server();
  if (server.pid < 0) {
    std::fprintf(stderr, "cc-rendezvous-bench: could not start a server process\n");
    return false;
  }
  std::printf(
      "server in a child process on 127.0.0.1:%d (pid %d); a healthy job of %d members "
      "heartbeats every %lld ms beside each abuse\n",
      server.port, static_cast<int>(server.pid), members,
      static_cast<long long>(kHeartbeatEvery.count()));
  std::fflush(stdout);
  bool ok = true;
  bool goal_met = true;
  {
    HealthyJob job(server.port, members, server.pid);
    if (!job.start()) {
      std::fprintf(stderr, "cc-rendezvous-bench: the healthy job could not join\n");
      ok = false;
    } else {
      std::this_thread::sleep_for(300ms);
      job.next_phase();
      std::this_thread::sleep_for(2s);
      report("nothing beside (baseline)", job.next_phase(), &goal_met);
      parked_gets_closed(server.port);
      report("90,000 parked gets closed at once", job.next_phase(), &goal_met);
      set_wakes_many(server.port);
      report("one Set waking 90,000 gets", job.next_phase(), &goal_met);
      waits_expire_together(server.port);
      report("90,000 waits expiring together", job.next_phase(), &goal_met);
      big_replies_unread(server.port);
      report("8 clients leaving 60 MiB unread", job.next_phase(), &goal_met);
      oversized_hellos(server.port);
      report("1000 hellos claiming 4 MiB", job.next_phase(), &goal_met);
      const auto [answered, dropped] = steady_pipeline(server.port);
      report("a client pipelining 100 kB sets", job.next_phase(), &goal_met);
      std::printf("  the pipelining client: %d of 400 frames answered%s\n", answered,
                  dropped ? ", then dropped" : ", never dropped");
      const AgentRankOutcome agent = hostile_rank_behind_agent(server.port);
      report("a rank behind an agent: 4+96 MiB", job.next_phase(), &goal_met);
      std::printf("  its agent's link %s; %d of 4 pipelined 1 MiB gets answered; its "
                  "neighbour %s; the rank ended: %s\n",
                  agent.link_kept ? "kept" : "LOST", agent.big_answers,
                  agent.neighbour_answered ? "answered" : "NOT answered",
                  agent.ended.empty() ? "(not ended)" : agent.ended.c_str());
      if (!agent.link_kept || agent.big_answers != 4 || !agent.neighbour_answered)
        goal_met = false;
      if (job.lost()) {
        std::printf("the healthy job heard an error or a peer event, or lost a connection\n");
        goal_met = false;
      }
    }
  }
  // SIGTERM while clients leave big replies unread and a get waits.
  std::vector<int> hogs;
  for (int c = 0; c < 4; ++c) {
    const int fd = client(server.port, "stop-hog-" + std::to_string(c));
    if (fd < 0) continue;
    rv::FrameReader r;
    send_all(fd, rv::encode_frame(1, rv::Set{"big", std::vector<uint8_t>(1u << 20, 7)}));
    read_frames(fd, r, 1, 10s);
    send_all(fd, gets("big", 40, 0));
    hogs.push_back(fd);
  }
  std::this_thread::sleep_for(500ms);
  const auto took = stop_server(server, 30s);
  std::printf("SIGTERM with 4 clients leaving 40 MiB unread: the server stopped in %.0f ms\n",
              static_cast<double>(took.count()));
  close_all(hogs);
  std::printf("goal (no heartbeat gap over %.0f ms, no member lost): %s\n", kGapGoalMs,
              goal_met ? "met" : "NOT met");
  std::fflush(stdout);
  return ok;
}

}  // namespace cc::tools::rendezvous_bench
