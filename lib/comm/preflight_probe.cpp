#include "lib/comm/preflight_probe.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <asio/io_context.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

#include "common/log.hpp"
#include "rendezvous/connect_by.hpp"

namespace cc::comm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A test connection: the asker sends kRequestSize bytes, the listener answers
// kReplySize bytes and closes. Little-endian.
//   request: u32 magic 'CCPF' | u32 version | u64 tag | i32 from | i32 to
//   reply:   u32 magic 'CCPF' | i32 rank    | u32 status (0: the tag asked for, 1: another)
constexpr uint32_t kMagic = 0x46504343;
constexpr uint32_t kVersion = 1;
constexpr size_t kRequestSize = 24;
constexpr size_t kReplySize = 12;
constexpr size_t kMaxPending = 256;          // test connections answered at once
constexpr milliseconds kAnswerWithin{2000};  // a test connection that says nothing is closed

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
uint64_t get64(const uint8_t* p) {
  return static_cast<uint64_t>(get32(p)) | static_cast<uint64_t>(get32(p + 4)) << 32;
}

int poll_ms(Clock::time_point until) {
  const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left + 1, 0, 1 << 30));
}

// A socket address for a numeric address; false when it is none.
bool socket_address(const std::string& addr, int port, const std::string& ifname,
                    sockaddr_storage* out, socklen_t* len) {
  std::memset(out, 0, sizeof *out);
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  if (inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    *len = sizeof *v4;
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    if (IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr) && !ifname.empty())
      v6->sin6_scope_id = if_nametoindex(ifname.c_str());
    *len = sizeof *v6;
    return true;
  }
  return false;
}

}  // namespace

uint64_t preflight_tag(const std::string& job_id, uint32_t comm_number) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  auto mix = [&](uint8_t b) {
    h ^= b;
    h *= 1099511628211ull;
  };
  for (char ch : job_id) mix(static_cast<uint8_t>(ch));
  mix(0);
  for (int i = 0; i < 4; ++i) mix(static_cast<uint8_t>(comm_number >> (8 * i)));
  return h;
}

PreflightListener::PreflightListener(UniqueFd fd, int port) : fd_(std::move(fd)), port_(port) {}

Status PreflightListener::open(const std::string& addr, const std::string& ifname,
                               std::unique_ptr<PreflightListener>* out) {
  sockaddr_storage sa{};
  socklen_t len = 0;
  if (!socket_address(addr, 0, ifname, &sa, &len))
    return make_status(CC_ERR_SYSTEM, "the reachability test cannot listen on '" + addr +
                                          "': not a numeric address");
  UniqueFd fd(::socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0 || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0 ||
      ::listen(fd.get(), 512) != 0)
    return make_status(CC_ERR_SYSTEM, "the reachability test cannot listen on " + addr + " (" +
                                          ifname + "): " + std::strerror(errno));
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &blen);
  const int port = bound.ss_family == AF_INET
                       ? ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port)
                       : ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  std::unique_ptr<PreflightListener> l(new PreflightListener(std::move(fd), port));
  l->wake_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (l->wake_.get() < 0)
    return make_status(CC_ERR_SYSTEM,
                       std::string("the reachability test: eventfd: ") + std::strerror(errno));
  *out = std::move(l);
  return Status::success();
}

PreflightListener::~PreflightListener() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (::write(wake_.get(), &one, sizeof one) < 0) {
      // The eventfd cannot be full after one write; nothing else to do.
    }
    thread_.join();
  }
}

void PreflightListener::start(uint64_t tag, int32_t rank) {
  if (thread_.joinable()) return;
  tag_ = tag;
  rank_ = rank;
  thread_ = std::thread([this] { serve(); });
}

void PreflightListener::serve() {
  struct Pending {
    UniqueFd fd;
    uint8_t in[kRequestSize] = {};
    size_t got = 0;
    Clock::time_point until;
  };
  std::vector<Pending> pending;
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({fd_.get(), POLLIN, 0});
    auto next = Clock::now() + milliseconds(500);
    for (const Pending& p : pending) {
      fds.push_back({p.fd.get(), POLLIN, 0});
      next = std::min(next, p.until);
    }
    const int rc = ::poll(fds.data(), fds.size(), poll_ms(next));
    if (rc < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;
    const auto now = Clock::now();
    // Answers first: accepting appends to `pending`, which fds[2..] mirror.
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending& p = pending[i];
      if (fds[i + 2].revents == 0) continue;
      const ssize_t n = ::recv(p.fd.get(), p.in + p.got, kRequestSize - p.got, 0);
      if (n > 0) p.got += static_cast<size_t>(n);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        p.fd.reset();
        continue;
      }
      if (p.got < kRequestSize) continue;
      if (get32(p.in) == kMagic && get32(p.in + 4) == kVersion) {
        const bool mine =
            get64(p.in + 8) == tag_ && static_cast<int32_t>(get32(p.in + 20)) == rank_;
        uint8_t reply[kReplySize];
        put32(reply, kMagic);
        put32(reply + 4, static_cast<uint32_t>(rank_));
        put32(reply + 8, mine ? 0 : 1);
        if (::send(p.fd.get(), reply, sizeof reply, MSG_NOSIGNAL) ==
            static_cast<ssize_t>(kReplySize))
          ++answered_;
      }
      p.fd.reset();
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [&](const Pending& p) { return p.fd.get() < 0 || now > p.until; }),
                  pending.end());
    if (fds[1].revents != 0) {
      for (;;) {
        UniqueFd conn(::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (conn.get() < 0) break;
        if (pending.size() >= kMaxPending) continue;  // closed: the asker sees it and says so
        Pending p;
        p.fd = std::move(conn);
        p.until = now + kAnswerWithin;
        pending.push_back(std::move(p));
      }
    }
  }
}

std::vector<rv::ProbeResult> probe_targets(const std::vector<rv::ProbeTarget>& targets,
                                           uint64_t tag, int32_t from, milliseconds timeout) {
  struct Probe {
    explicit Probe(asio::io_context& io) : socket(io) {}
    asio::ip::tcp::socket socket;
    uint8_t out[kRequestSize] = {};
    uint8_t in[kReplySize] = {};
    bool connected = false;
    bool done = false;
  };
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  const std::string within = std::to_string(timeout.count()) + " ms";
  std::vector<rv::ProbeResult> results(targets.size());
  asio::io_context io;
  asio::steady_timer no_answer(io);  // for the connected ones: the connects have their own
  std::vector<std::unique_ptr<Probe>> probes;
  size_t pending = targets.size();
  auto finish = [&](size_t i, bool reached, int error, std::string words) {
    Probe& p = *probes[i];
    if (p.done) return;
    p.done = true;
    results[i].reached = reached;
    results[i].error = error;
    results[i].words = std::move(words);
    std::error_code ignored;
    p.socket.close(ignored);
    if (--pending == 0) no_answer.cancel();
  };
  auto connect_error = [](int e) { return std::string("connect: ") + std::strerror(e); };
  auto check_answer = [&](size_t i) {
    const uint8_t* in = probes[i]->in;
    const int32_t rank = static_cast<int32_t>(get32(in + 4));
    if (get32(in) != kMagic)
      finish(i, false, 0, "connected, but another program answered there");
    else if (get32(in + 8) != 0 || rank != targets[i].rank)
      finish(i, false, 0,
             "connected, but it answered as rank " + std::to_string(rank) +
                 " of another job or communicator (a port forward or NAT leading elsewhere?)");
    else
      finish(i, true, 0, "reached");
  };
  auto ask = [&](size_t i) {
    Probe& p = *probes[i];
    asio::async_write(p.socket, asio::buffer(p.out), [&, i](std::error_code ec, size_t) {
      if (probes[i]->done) return;
      if (ec)
        return finish(i, false, ec.value(), std::string("send: ") + std::strerror(ec.value()));
      asio::async_read(probes[i]->socket, asio::buffer(probes[i]->in),
                       [&, i](std::error_code ec, size_t) {
                         if (probes[i]->done) return;
                         if (!ec) return check_answer(i);
                         finish(i, false, ec == asio::error::eof ? 0 : ec.value(),
                                "connected, but the connection closed before the test's answer "
                                "(another program listens there?)");
                       });
    });
  };
  for (size_t i = 0; i < targets.size(); ++i) {
    const rv::ProbeTarget& t = targets[i];
    results[i].rank = t.rank;
    probes.push_back(std::make_unique<Probe>(io));
    Probe& p = *probes.back();
    put32(p.out, kMagic);
    put32(p.out + 4, kVersion);
    put64(p.out + 8, tag);
    put32(p.out + 16, static_cast<uint32_t>(from));
    put32(p.out + 20, static_cast<uint32_t>(t.rank));
    sockaddr_storage sa{};
    socklen_t len = 0;
    if (!socket_address(t.addr, static_cast<int>(t.port), "", &sa, &len)) {
      finish(i, false, EINVAL, "'" + t.addr + "' is not a numeric address");
      continue;
    }
    const auto endpoint = rv::endpoint_of(reinterpret_cast<const sockaddr*>(&sa), len);
    std::error_code ec;
    p.socket.open(endpoint.protocol(), ec);
    if (ec) {
      finish(i, false, ec.value(), std::string("socket: ") + std::strerror(ec.value()));
      continue;
    }
    p.socket.set_option(asio::ip::tcp::no_delay(true), ec);
    rv::async_connect_by(p.socket, endpoint, deadline, [&, i](std::error_code ec) {
      if (probes[i]->done) return;
      if (ec == asio::error::timed_out)
        return finish(i, false, ETIMEDOUT, "connect: no answer within " + within + " (timed out)");
      if (ec) return finish(i, false, ec.value(), connect_error(ec.value()));
      probes[i]->connected = true;
      ask(i);
    });
  }
  if (pending > 0) {
    no_answer.expires_at(deadline);
    no_answer.async_wait([&](std::error_code ec) {
      if (ec) return;
      for (size_t i = 0; i < probes.size(); ++i)
        if (probes[i]->connected)
          finish(i, false, 0, "connected, but the test got no answer within " + within);
    });
  }
  io.run();
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  log().debug("reachability test: {} connection(s) from rank {} in {} ms", targets.size(), from,
              took);
  return results;
}

}  // namespace cc::comm
