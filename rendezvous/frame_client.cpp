// cc's own rendezvous client: plain POSIX sockets with poll() deadlines.
//
// Two steps: dial_tcp() reaches cc's server (retrying with backoff while
// nobody listens yet), then FrameClient says Hello over the connected stream
// and serves every call of the store and the membership on it. FrameClient
// needs nothing of TCP but the socket: a route over another kind of stream
// (a node agent's local Unix socket) is a second dial beside dial_tcp().
//
// Threads: whole frames are written under write_mu_; one thread at a time
// reads the socket (read_mu_) and files what arrives in the inbox
// (client_inbox.hpp, under state_mu_): replies under their request_id for
// whoever waits for them, peer events in a bounded queue. A thread
// waiting for a reply while another reads sleeps on cv_ in short slices, so a
// heartbeat from one thread and next_event() or a long join on another work
// together.
//
// Failover (FrameClientOptions::locate): a lost connection makes the inbox
// `moving`, and one thread of the client's own (move_on) finds the next
// server, greets it and resumes there on a socket of its own, with plain
// blocking reads of whole frames; only then does it take every lock, swap
// the socket in and write again what the ResumeBook (resume_book.hpp) holds
// unanswered. Callers meanwhile wait on cv_ within their deadlines; requests
// they make are kept in the book and written by the swap.
#include "rendezvous/frame_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "common/backoff.hpp"
#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/unique_fd.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/client_inbox.hpp"
#include "rendezvous/connect_by.hpp"
#include "rendezvous/resume_book.hpp"
#include "rendezvous/tls/socket_io.hpp"
#include "rendezvous/tls/words.hpp"

namespace cc::rv {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kReadSlice{50};
// A request that waits by design (get, wait, join, ...) waits its timeout at
// the server, which then answers with its message (the keys or ranks still
// missing); this is all the client adds for that answer to arrive.
constexpr milliseconds kAnswerGrace = ResumeBook::kAnswerGrace;
constexpr milliseconds kAttemptCap{5000};  // one connect attempt to one address
// During a failover, the locator is asked again after this long of dialing
// what it said (a server that is gone refuses at once; a lost host does not).
constexpr milliseconds kRelocateEvery{1000};
// A server silent this long while the client waits for it is looked up
// again: a leader that was paused is still connected but no longer leads.
constexpr milliseconds kSilence{1000};
constexpr size_t kSessionBytes = 16;
const Clock::time_point kNever = Clock::time_point::max();

using Fd = UniqueFd;

// A connected socket to the server, and its TLS when the client speaks TLS
// (FrameClientOptions::tls). The stream is freed before the socket closes.
struct Conn {
  Fd fd;
  std::unique_ptr<tls::Stream> tls;
  int get() const { return fd.get(); }
};

int poll_ms(Clock::time_point until) {
  if (until == kNever) return -1;
  const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left + 1, 0, 1 << 30));
}

long long elapsed_ms(Clock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - since).count();
}

Clock::time_point after(milliseconds d) {
  if (d.count() >= (1LL << 40)) return kNever;
  return Clock::now() + d;
}

std::string strip_brackets(const std::string& addr) {
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']')
    return addr.substr(1, addr.size() - 2);
  return addr;
}

std::string make_endpoint(const std::string& addr, int port) {
  if (port == 0) return addr;  // an etcd address, reached through a node agent
  const std::string host = strip_brackets(addr);
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::vector<uint8_t> make_session() {
  std::random_device rd;
  std::vector<uint8_t> out(kSessionBytes);
  for (auto& b : out) b = static_cast<uint8_t>(rd());
  return out;
}

// Sends all of `bytes` on a non-blocking socket, polling while it is full:
// 0 once all went, kSendTimedOut when the deadline passed first, else the
// errno of the call (`*call`: "send" or "poll") that failed.
constexpr int kSendTimedOut = -1;
int send_all_by(const Conn& fd, std::span<const uint8_t> bytes, Clock::time_point deadline,
                const char** call) {
  size_t done = 0;
  short events = POLLOUT;
  while (done < bytes.size()) {
    const ssize_t n = tls::send_some(fd.get(), fd.tls.get(), bytes.data() + done,
                                     bytes.size() - done, &events);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      *call = "send";
      return errno;
    }
    if (Clock::now() >= deadline) return kSendTimedOut;
    pollfd p{fd.get(), events, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(poll_ms(deadline), 1000))) < 0 &&
        errno != EINTR) {
      *call = "poll";
      return errno;
    }
  }
  return 0;
}

// Blocking I/O of whole frames on a socket of its own, for a failover's
// handshake and resumes before the socket is taken up.
Status write_all_by(const Conn& fd, std::span<const uint8_t> bytes, Clock::time_point deadline,
                    const std::string& endpoint) {
  const char* call = "";
  const int err = send_all_by(fd, bytes, deadline, &call);
  if (err == kSendTimedOut)
    return make_status(CC_ERR_TIMEOUT, "the rendezvous at " + endpoint + " took no frame in time");
  if (err != 0)
    return make_status(CC_ERR_RENDEZVOUS, "the connection to the rendezvous at " + endpoint +
                                              " failed (" + call + ": " + std::strerror(err) + ")");
  return Status::success();
}

Status read_all_by(const Conn& fd, uint8_t* out, size_t size, Clock::time_point deadline,
                   const std::string& endpoint) {
  size_t done = 0;
  short events = POLLIN;
  while (done < size) {
    const ssize_t n = tls::recv_some(fd.get(), fd.tls.get(), out + done, size - done, &events);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0)
      return make_status(CC_ERR_RENDEZVOUS,
                         "the rendezvous server at " + endpoint + " closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return make_status(CC_ERR_RENDEZVOUS, "the connection to the rendezvous at " + endpoint +
                                                " failed (recv: " + std::strerror(errno) + ")");
    if (Clock::now() >= deadline)
      return make_status(CC_ERR_TIMEOUT,
                         "the rendezvous at " + endpoint + " did not answer in time");
    if (tls::buffered(fd.tls.get()) > 0) continue;
    pollfd p{fd.get(), events, 0};
    (void)::poll(&p, 1, static_cast<int>(std::min<long long>(poll_ms(deadline), 1000)));
  }
  return Status::success();
}

Status read_frame_by(const Conn& fd, Clock::time_point deadline, const std::string& endpoint,
                     FrameReader::Frame* out) {
  const Limits limits;
  uint8_t header[kHeaderSize];
  if (Status s = read_all_by(fd, header, sizeof(header), deadline, endpoint); !s.ok()) return s;
  FrameHeader h;
  DecodeError e = parse_header(header, limits, &h);
  std::vector<uint8_t> payload(e == DecodeError::none ? h.length : 0);
  if (e == DecodeError::none) {
    if (Status s = read_all_by(fd, payload.data(), payload.size(), deadline, endpoint); !s.ok())
      return s;
    e = decode_message(h.type, payload, limits, &out->message);
  }
  if (e != DecodeError::none)
    return make_status(CC_ERR_RENDEZVOUS,
                       "the rendezvous at " + endpoint + " sent a frame we cannot read (" +
                           describe(e) + "): is it a cc rendezvous server of the same version?");
  out->request_id = h.request_id;
  return Status::success();
}

std::string local_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

// One attempt to connect to one resolved address. Returns 0 and sets *out, or
// an errno (ETIMEDOUT when no answer came before `until`).
int connect_one(const addrinfo* ai, Clock::time_point until, Fd* out) {
  Fd fd;
  if (const int err = connect_by(endpoint_of(ai->ai_addr, ai->ai_addrlen), until, &fd); err != 0)
    return err;
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  *out = std::move(fd);
  return 0;
}

// What the server would refuse by dropping the connection ("a field with an
// invalid value", "a field over its limit") is refused here instead, so a
// bad argument costs one call, not the connection.
Status check_key(const std::string& key) {
  const Limits limits;
  if (key.empty())
    return make_status(CC_ERR_INVALID_ARGUMENT, "the key is empty: a key needs at least one byte");
  if (key.size() > limits.max_key) {
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "the key '" + shortened(key) + "' is over the limit of " +
                           std::to_string(limits.max_key) + " bytes: use a shorter key");
  }
  return Status::success();
}

Status check_value(const std::string& key, size_t size) {
  const Limits limits;
  if (size <= limits.max_value) return Status::success();
  return make_status(CC_ERR_INVALID_ARGUMENT,
                     "the value of key '" + shortened(key) + "' is " + std::to_string(size) +
                         " bytes, over the limit of " + std::to_string(limits.max_value) +
                         " bytes: store large data elsewhere and put its location here");
}

std::string reach_advice() {
  return ". Is rank 0 (or cc-rendezvous) running and listening there? Check "
         "MASTER_ADDR/MASTER_PORT and firewalls";
}

// Dials cc's server over TCP, with retries and exponential backoff (with
// jitter) while it is not there yet, until `deadline`.
Status dial_tcp(const FrameClientOptions& o, const std::string& endpoint,
                Clock::time_point deadline, Fd* out) {
  const auto start = Clock::now();
  const std::string host = strip_brackets(o.addr);
  const std::string port = std::to_string(o.port);
  Backoff backoff;
  int attempts = 0;
  std::string last_cause = "no attempt was made";
  bool resolve_failed = false;
  bool timed_out = false;

  for (;;) {
    ++attempts;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const int gai = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (gai != 0) {
      resolve_failed = true;
      timed_out = false;
      last_cause = gai == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(gai);
    } else {
      resolve_failed = false;
      std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
      for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        const auto until = std::min(deadline, Clock::now() + kAttemptCap);
        const int err = connect_one(ai, until, out);
        if (err == 0) return Status::success();
        timed_out = err == ETIMEDOUT;
        last_cause = timed_out ? "no answer (connection timed out)" : std::strerror(err);
        for (auto& c : last_cause)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
    }
    if (!backoff.sleep_until_next(deadline)) break;
  }

  const std::string tried = " after " + std::to_string(attempts) + " attempt" +
                            (attempts == 1 ? "" : "s") + " in " +
                            std::to_string(elapsed_ms(start)) + " ms: ";
  if (resolve_failed) {
    return make_status(CC_ERR_RENDEZVOUS, "cannot resolve the rendezvous host '" + host + "' (of " +
                                              endpoint + ")" + tried + last_cause +
                                              ". Check MASTER_ADDR and the name service (DNS, "
                                              "/etc/hosts)");
  }
  return make_status(
      timed_out ? CC_ERR_TIMEOUT : CC_ERR_RENDEZVOUS,
      "cannot reach the rendezvous at " + endpoint + tried + last_cause + reach_advice());
}

// Connects to cc-run's node agent at its Unix socket, retrying while the
// agent is not listening yet, until `deadline`.
Status dial_agent(const FrameClientOptions& o, const std::string& endpoint,
                        Clock::time_point deadline, Fd* out) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (o.agent_socket.size() >= sizeof(address.sun_path))
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "the node agent's socket path '" + o.agent_socket + "' is over " +
                           std::to_string(sizeof(address.sun_path) - 1) +
                           " bytes: check CC_AGENT_SOCKET");
  std::memcpy(address.sun_path, o.agent_socket.data(), o.agent_socket.size());
  Backoff backoff;
  std::string cause;
  for (;;) {
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0)
      return make_status(CC_ERR_SYSTEM, std::string("socket: ") + std::strerror(errno));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) {
      const int flags = ::fcntl(fd.get(), F_GETFL);
      ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK);
      *out = std::move(fd);
      return Status::success();
    }
    cause = std::strerror(errno);
    if (errno != ENOENT && errno != ECONNREFUSED && errno != EAGAIN) break;
    if (!backoff.sleep_until_next(deadline)) break;
  }
  for (auto& c : cause) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return make_status(CC_ERR_RENDEZVOUS,
                     "cannot reach cc-run's node agent at " + o.agent_socket + " (for " + endpoint +
                         "): " + cause +
                         ". Is this rank running under cc-run, which sets CC_AGENT_SOCKET? Unset "
                         "CC_AGENT_SOCKET to reach the rendezvous directly");
}

// TLS over a socket dialled to the server at host, when the options say so;
// the socket alone otherwise.
Status secure(Fd fd, const FrameClientOptions& o, const std::string& host,
              const std::string& endpoint, Clock::time_point deadline, Conn* out) {
  out->fd = std::move(fd);
  if (!o.tls) return Status::success();
  // The handshake's last flight and the first request are two writes: with
  // Nagle the request would wait for the server's delayed ACK.
  const int one = 1;
  ::setsockopt(out->get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return tls::client_handshake(out->get(), *o.tls, strip_brackets(host), endpoint, deadline,
                               &out->tls);
}

// The store and the membership over one connected stream to cc's server.
class FrameClient final : public Client {
 public:
  FrameClient(Conn fd, const FrameClientOptions& options, std::string endpoint)
      : fd_(std::move(fd)),
        options_(options),
        endpoint_(std::move(endpoint)),
        current_(endpoint_),
        session_(make_session()),
        inbox_(endpoint_) {}

  // After the first handshake: a lost connection is followed to the next
  // server from now on.
  void enable_failover() {
    inbox_.set_failover(options_.agent_socket.empty() ? options_.locate != nullptr
                                                      : options_.agent_follows);
  }

  ~FrameClient() override {
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      closing_ = true;
    }
    cv_.notify_all();
    if (mover_.joinable()) mover_.join();
  }

  Hello hello() const {
    Hello hello;
    hello.job_id = options_.job_id;
    hello.host = local_hostname();
    hello.pid = static_cast<uint32_t>(::getpid());
    hello.client = options_.client;
    hello.session = session_;
    return hello;
  }

  Status handshake(Clock::time_point deadline) {
    const Hello hello = this->hello();
    Challenge challenge;
    if (Status s = expect(hello, deadline, "the handshake (hello)", &challenge); !s.ok()) return s;
    if (!challenge.auth_required) return Status::success();
    if (options_.token.empty()) {
      return make_status(CC_ERR_AUTH, "the rendezvous at " + endpoint_ +
                                          " requires a token: set CC_RENDEZVOUS_TOKEN or "
                                          "CC_RENDEZVOUS_TOKEN_FILE (or the config's token)");
    }
    Auth auth{auth_mac(options_.token, challenge.nonce, options_.job_id)};
    return expect_ok(auth, deadline, "the handshake (auth)");
  }

  Status set(const std::string& key, std::span<const uint8_t> value) override {
    if (Status s = check_key(key); !s.ok()) return s;
    if (Status s = check_value(key, value.size()); !s.ok()) return s;
    Set m{key, std::vector<uint8_t>(value.begin(), value.end())};
    return expect_ok(m, after(options_.request_timeout), "a set of key '" + key + "'");
  }

  Status get(const std::string& key, std::vector<uint8_t>* value, uint32_t timeout_ms) override {
    if (Status s = check_key(key); !s.ok()) return s;
    Value v;
    if (Status s = expect(Get{key, timeout_ms}, waiting_deadline(timeout_ms),
                          "a get of key '" + key + "'", &v);
        !s.ok()) {
      return s;
    }
    if (value != nullptr) *value = std::move(v.value);
    return Status::success();
  }

  Status add(const std::string& key, int64_t delta, int64_t* result) override {
    if (Status s = check_key(key); !s.ok()) return s;
    Integer v;
    if (Status s = expect(Add{key, delta}, after(options_.request_timeout),
                          "an add to key '" + key + "'", &v);
        !s.ok()) {
      return s;
    }
    if (result != nullptr) *result = v.value;
    return Status::success();
  }

  Status wait(const std::vector<std::string>& keys, uint32_t timeout_ms) override {
    const Limits limits;
    if (keys.size() > limits.max_wait_keys) {
      return make_status(CC_ERR_INVALID_ARGUMENT, "a wait for " + std::to_string(keys.size()) +
                                                      " keys is over the limit of " +
                                                      std::to_string(limits.max_wait_keys) +
                                                      " keys in one wait: split it");
    }
    for (const std::string& key : keys)
      if (Status s = check_key(key); !s.ok()) return s;
    return expect_ok(Wait{keys, timeout_ms}, waiting_deadline(timeout_ms),
                     "a wait for " + std::to_string(keys.size()) + " key(s)");
  }

  Status del(const std::string& key) override {
    if (Status s = check_key(key); !s.ok()) return s;
    return expect_ok(Del{key}, after(options_.request_timeout), "a delete of key '" + key + "'");
  }

  Status compare_set(const std::string& key, const std::vector<uint8_t>* expected,
                     std::span<const uint8_t> desired, bool* swapped) override {
    if (Status s = check_key(key); !s.ok()) return s;
    if (Status s = check_value(key, std::max(desired.size(), expected ? expected->size() : 0));
        !s.ok())
      return s;
    CompareSet m;
    m.key = key;
    m.has_expected = expected != nullptr;
    if (expected != nullptr) m.expected = *expected;
    m.value.assign(desired.begin(), desired.end());
    CompareSetResult r;
    if (Status s =
            expect(m, after(options_.request_timeout), "a compare-set of key '" + key + "'", &r);
        !s.ok()) {
      return s;
    }
    if (swapped != nullptr) *swapped = r.swapped;
    return Status::success();
  }

  Status join(const Join& request, Joined* out) override {
    // timeout_ms 0: the server waits without a deadline, and so do we.
    const auto deadline = request.timeout_ms == 0 ? kNever : waiting_deadline(request.timeout_ms);
    if (Status s = expect(request, deadline,
                          "the join of rank " + std::to_string(request.info.rank), out);
        !s.ok())
      return s;
    book([&] { book_.joined(request.info, *out); });
    return Status::success();
  }

  Status leave() override {
    book([&] { book_.left(); });
    return expect_ok(Leave{}, after(options_.request_timeout), "a leave");
  }

  Status leave_nowait() override {
    book([&] { book_.left(); });
    return send_nowait(Leave{}, "a leave");
  }

  Status recover(const Recover& request, const MakeId& make_id, Joined* out) override {
    const auto start = Clock::now();
    const auto deadline = waiting_deadline(request.timeout_ms);
    const std::string what =
        std::string(request.kind == RecoverKind::shrink ? "cc_comm_shrink" : "cc_comm_regrow") +
        " of rank " + std::to_string(request.info.rank);
    Message reply;
    if (Status s = transact(request, deadline, what, &reply); !s.ok()) return s;
    if (const auto* wanted = std::get_if<RecoverIdWanted>(&reply)) {
      RecoverId id;
      id.generation = wanted->generation;
      if (Status s = make_id(&id.unique_id); !s.ok()) return s;
      const auto used = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
      id.timeout_ms = static_cast<uint32_t>(
          std::max<long long>(1, static_cast<long long>(request.timeout_ms) - used));
      if (Status s = transact(id, deadline, what + " (sending the new NCCL id)", &reply); !s.ok())
        return s;
    }
    auto* joined = std::get_if<Joined>(&reply);
    if (joined == nullptr) return unexpected(reply, "recover");
    *out = std::move(*joined);
    book([&] { book_.joined(request.info, *out); });
    return Status::success();
  }

  Status heartbeat(uint64_t last_completed) override {
    book([&] { book_.completed(last_completed); });
    return expect<HeartbeatAck>(Heartbeat{last_completed}, after(options_.request_timeout),
                                "a heartbeat");
  }

  Status heartbeat_nowait(uint64_t last_completed) override {
    book([&] { book_.completed(last_completed); });
    return send_nowait(Heartbeat{last_completed}, "a heartbeat");
  }

  Status heartbeat_with_calls_nowait(const Heartbeat& h) override {
    book([&] { book_.completed(h.last_completed); });
    return send_nowait(h, "a heartbeat");
  }

  std::optional<CallsWanted> next_calls_wanted() override {
    std::lock_guard<std::mutex> lock(state_mu_);
    return inbox_.take_want();
  }

  Status end_calls(const CallsEnd& request, const PointsIn& points_in) override {
    const auto deadline = waiting_deadline(request.timeout_ms);
    CallsEnd next = request;
    for (;;) {
      Message reply;
      if (Status s = transact(next, deadline, "the comparison of the ranks' last calls", &reply);
          !s.ok())
        return s;
      if (std::holds_alternative<Ok>(reply)) return Status::success();
      const auto* wanted = std::get_if<CallsWanted>(&reply);
      if (wanted == nullptr) return unexpected(reply, "calls-end");
      next.calls = points_in(wanted->after, wanted->through);
      next.answers = wanted->id;
    }
  }

  Status abort_nowait(const std::string& reason) override {
    return send_nowait(Abort{reason}, "an abort");
  }

  // Sends a request whose answer nobody waits for (it is dropped on arrival).
  Status send_nowait(const Message& request, const std::string& what) {
    uint32_t id = next_id_.fetch_add(1);
    if (id == 0) id = next_id_.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      // While the client moves to the next server a heartbeat or a leave is
      // dropped: the resume tells the server what it would have.
      if (inbox_.moving()) return Status::success();
      if (!inbox_.usable()) return inbox_.broken();
    }
    const std::vector<uint8_t> frame = encode_frame(id, request);
    std::lock_guard<std::mutex> lock(write_mu_);
    Status s = send_all(frame, after(milliseconds(1000)), what);
    if (!s.ok() && s.code == CC_ERR_TIMEOUT) return mark_broken(s);  // a frame cut in half
    if (!s.ok() && failover_lost()) return Status::success();
    return s;
  }

  Status set_heartbeat_window(milliseconds window) override {
    book([&] { book_.window(window); });
    return expect_ok(HeartbeatWindow{static_cast<uint32_t>(window.count())},
                     after(options_.request_timeout), "a heartbeat window request");
  }

  Status progress(uint32_t comm_number, int32_t rank, Progress* out,
                  milliseconds timeout) override {
    return progress_in(comm_number, 0, rank, out, timeout);
  }

  Status progress_in(uint32_t comm_number, uint32_t generation, int32_t rank, Progress* out,
                     milliseconds timeout) override {
    return expect(ProgressQuery{comm_number, rank, generation}, after(timeout), "a progress query",
                  out);
  }

  Status progress_with_calls(uint32_t comm_number, uint32_t generation, Progress* out,
                             milliseconds timeout) override {
    return expect(ProgressQuery{comm_number, -1, generation, true}, after(timeout),
                  "a progress query", out);
  }

  Status status(const StatusQuery& query, StatusReport* out, milliseconds timeout) override {
    return expect(query, after(timeout), "a status query", out);
  }

  Status init_failed(uint32_t comm_number, const std::string& reason,
                     milliseconds timeout) override {
    return expect_ok(InitFailed{comm_number, reason}, after(timeout), "an init failure report");
  }

  Status preflight_ready(const PreflightReady& request, PreflightPlan* out) override {
    if (!request.enabled) {
      *out = PreflightPlan{PreflightStep::skipped, "CC_PREFLIGHT=0", {}};
      return send_nowait(request, "a reachability test opt-out");
    }
    return expect(request, waiting_deadline(request.timeout_ms), "the reachability test's start",
                  out);
  }

  Status preflight_report(const PreflightReport& request) override {
    return expect_ok(request, waiting_deadline(request.timeout_ms),
                     "the reachability test's verdict");
  }

  void pump() override {
    check_leader();
    if (!read_mu_.try_lock()) return;
    read_once(Clock::now());
    read_mu_.unlock();
    cv_.notify_all();
  }

  // While the client moves to the next server it is heard: the failover
  // has its own deadline, and then the loss is told as an event.
  Clock::time_point last_heard() const override {
    if (moving_.load(std::memory_order_relaxed)) return Clock::now();
    return Clock::time_point(Clock::duration(last_heard_.load(std::memory_order_relaxed)));
  }

  Status abort(const std::string& reason) override {
    return expect_ok(Abort{reason}, after(options_.request_timeout), "an abort");
  }

  std::optional<PeerEvent> next_event(milliseconds timeout) override {
    const auto deadline = after(timeout);
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(state_mu_);
        if (auto e = inbox_.take_event()) return e;
        if (inbox_.moving()) {
          const auto now = Clock::now();
          if (now >= deadline) return std::nullopt;
          cv_.wait_until(lock, std::min(deadline, now + kReadSlice));
          continue;
        }
        if (!inbox_.usable()) return std::nullopt;
      }
      const auto now = Clock::now();
      if (now >= deadline) return std::nullopt;
      read_or_wait(std::min(deadline, now + kReadSlice), [&] { return inbox_.has_event(); });
    }
  }

  const std::string& endpoint() const override { return endpoint_; }

  std::string named() const override { return "the rendezvous server at " + endpoint_; }

  std::string lost_advice() const override { return "look at cc-run or cc-rendezvous"; }

 private:
  Clock::time_point waiting_deadline(uint32_t timeout_ms) const {
    if (timeout_ms == 0) return after(options_.request_timeout);
    return after(milliseconds(timeout_ms) + kAnswerGrace);
  }

  Status unexpected(const Message& reply, const char* request) const {
    return make_status(CC_ERR_RENDEZVOUS, "the rendezvous at " + endpoint_ + " answered a " +
                                              request + " with an unexpected '" +
                                              type_name(type_of(reply)) +
                                              "' message: is it a server of another cc version?");
  }

  // Sends one request and takes its answer, which must be an R (kept in *out
  // unless out is null); any other answer is unexpected for that request.
  template <class R>
  Status expect(const Message& request, Clock::time_point deadline, const std::string& what,
                R* out = nullptr) {
    Message reply;
    if (Status s = transact(request, deadline, what, &reply); !s.ok()) return s;
    auto* r = std::get_if<R>(&reply);
    if (r == nullptr) return unexpected(reply, type_name(type_of(request)));
    if (out != nullptr) *out = std::move(*r);
    return Status::success();
  }

  Status expect_ok(const Message& request, Clock::time_point deadline, const std::string& what) {
    return expect<Ok>(request, deadline, what);
  }

  // Sends one request and waits for its reply; an Error reply becomes the
  // returned Status.
  Status transact(const Message& request, Clock::time_point deadline, const std::string& what,
                  Message* reply) {
    const uint32_t id = next_id();
    const bool failover = inbox_.failover();
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      if (!inbox_.usable() && !inbox_.moving()) return inbox_.broken();
      inbox_.await(id);
      // Kept until answered, to be written again on the next server.
      if (failover) book_.await(id, request, deadline);
    }
    const std::vector<uint8_t> frame = encode_frame(id, request);
    Status sent;
    {
      std::lock_guard<std::mutex> lock(write_mu_);
      bool write = true;
      if (failover) {
        // A failover writes what the book holds: written there, or to be.
        std::lock_guard<std::mutex> lock(state_mu_);
        write = !inbox_.moving() && book_.take_for_sending(id);
      }
      if (write) sent = send_all(frame, deadline, what);
    }
    if (!sent.ok() && !failover_lost()) {
      std::lock_guard<std::mutex> lock(state_mu_);
      inbox_.give_up(id);
      book_.done(id);
      return sent;
    }
    Status s = await(id, deadline, what, reply);
    if (!s.ok()) return s;
    if (auto* error = std::get_if<Error>(reply)) return server_error(*error, endpoint_);
    return Status::success();
  }

  Status send_all(std::span<const uint8_t> bytes, Clock::time_point deadline,
                  const std::string& what) {
    const char* call = "";
    const int err = send_all_by(fd_, bytes, deadline, &call);
    if (err == 0) return Status::success();
    if (err == kSendTimedOut)
      return make_status(CC_ERR_TIMEOUT, "the rendezvous at " + endpoint_ + " did not take " +
                                             what + " in time: is the server overloaded or stuck?");
    if (std::strcmp(call, "send") == 0 && (err == EPIPE || err == ECONNRESET))
      return mark_broken(closed_status());
    return mark_broken(system_error(call, err));
  }

  Status await(uint32_t id, Clock::time_point deadline, const std::string& what, Message* reply) {
    const auto start = Clock::now();
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(state_mu_);
        if (auto m = inbox_.take_reply(id)) {
          book_.done(id);
          *reply = std::move(*m);
          return Status::success();
        }
        const bool moving = inbox_.moving();
        if (!inbox_.usable() && !moving) {
          inbox_.give_up(id);
          book_.done(id);
          return inbox_.broken();
        }
        if (Clock::now() >= deadline) {
          inbox_.give_up(id);  // a late reply is dropped
          book_.done(id);
          return make_status(
              CC_ERR_TIMEOUT,
              "the rendezvous at " + current_ + " did not answer " + what + " within " +
                  std::to_string(elapsed_ms(start)) + " ms" +
                  (moving ? " (the connection was lost: " + inbox_.lost().message +
                                "; the client is still looking for the next server)"
                          : ": is the server stopped, overloaded or stuck?"));
        }
        if (moving) {  // the failover writes the request again once it is done
          cv_.wait_until(lock, std::min(deadline, Clock::now() + kReadSlice));
          continue;
        }
      }
      check_leader();
      read_or_wait(std::min(deadline, Clock::now() + kReadSlice),
                   [&] { return inbox_.has_reply(id); });
    }
  }

  // Reads until `slice` when no other thread is reading; else waits until
  // `slice` for what that thread files (`arrived`, asked under state_mu_) or
  // for the connection to break.
  template <class Arrived>
  void read_or_wait(Clock::time_point slice, const Arrived& arrived) {
    if (read_mu_.try_lock()) {
      read_once(slice);
      read_mu_.unlock();
      cv_.notify_all();
    } else {
      std::unique_lock<std::mutex> lock(state_mu_);
      cv_.wait_until(lock, slice, [&] { return arrived() || !inbox_.usable(); });
    }
  }

  // Reads what arrives before `until` and files it. Caller holds read_mu_.
  void read_once(Clock::time_point until) {
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      if (!inbox_.usable()) return;
    }
    pollfd p{fd_.get(), read_events_, 0};
    const int rc = tls::buffered(fd_.tls.get()) > 0 ? 1 : ::poll(&p, 1, poll_ms(until));
    if (rc < 0) {
      if (errno != EINTR) (void)mark_broken(system_error("poll", errno));
      return;
    }
    if (rc == 0) return;
    uint8_t buf[65536];
    const ssize_t n = tls::recv_some(fd_.get(), fd_.tls.get(), buf, sizeof(buf), &read_events_);
    if (n == 0) {
      (void)mark_broken(closed_status());
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      (void)mark_broken(errno == ECONNRESET ? closed_status() : system_error("recv", errno));
      return;
    }
    last_heard_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(state_mu_);
    inbox_.receive(std::span<const uint8_t>(buf, static_cast<size_t>(n)));
    // A server we gave up on (garbage, a flood of events) hears so at once;
    // one that said it stops is left for the next.
    if (!inbox_.usable()) ::shutdown(fd_.get(), SHUT_RDWR);
    if (inbox_.moving()) start_moving();
  }

  Status closed_status() const {
    if (fd_.tls && fd_.tls->asked_for_certificate())
      return make_status(CC_ERR_RENDEZVOUS,
                         "the rendezvous server at " + endpoint_ +
                             " closed the connection; it requires client certificates (mTLS): if "
                             "it refused this client's, set CC_TLS_CERT and CC_TLS_KEY (or the "
                             "config's tls_cert and tls_key) to one signed by the CA it was given "
                             "(--tls-client-ca); else did it stop?");
    return make_status(CC_ERR_RENDEZVOUS, "the rendezvous server at " + endpoint_ +
                                              " closed the connection (did it stop or crash?)");
  }

  Status system_error(const char* call, int err) const {
    if (err == EPROTO && fd_.tls)
      return make_status(CC_ERR_RENDEZVOUS,
                         tls::client_failure_words(fd_.tls->failure(), endpoint_,
                                                   options_.tls->expected_name(
                                                       strip_brackets(options_.addr)),
                                                   options_.tls->files()));
    return make_status(CC_ERR_RENDEZVOUS, "the connection to the rendezvous at " + endpoint_ +
                                              " failed (" + call + ": " + std::strerror(err) + ")");
  }

  // Marks the connection unusable and tells the event reader once, so a
  // watchdog learns that the server is gone; with a locator the client
  // moves to the next server instead (start_moving).
  Status mark_broken(Status s) {
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      if (inbox_.lose(s)) start_moving();
    }
    cv_.notify_all();
    return s;
  }

  // With a locator: a server silent for kSilence is looked up again, at
  // most once a kSilence; when the locator names another server now (a
  // paused leader still holds the connection but was deposed), the
  // connection is given up and the client moves there.
  void check_leader() {
    if (!inbox_.failover() || !options_.locate || moving_.load(std::memory_order_relaxed)) return;
    const auto now = Clock::now();
    const auto heard = Clock::time_point(Clock::duration(last_heard_.load(std::memory_order_relaxed)));
    if (now - heard < kSilence || now - last_leader_check_.load() < kSilence) return;
    last_leader_check_.store(now);
    std::string host, was;
    int port = 0;
    if (!options_.locate(now + kSilence, &host, &port).ok() || host.empty()) return;
    const std::string there = make_endpoint(host, port);
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      was = current_;
      if (was == there || was.find("at " + there + ")") != std::string::npos) return;
      if (inbox_.moving()) return;
      if (fd_.get() >= 0) ::shutdown(fd_.get(), SHUT_RDWR);
    }
    (void)mark_broken(make_status(
        CC_ERR_RENDEZVOUS, "the rendezvous server at " + was + " went silent and " + there +
                               " leads now"));
  }

  // True when the connection was lost and the client moves to the next server.
  bool failover_lost() {
    std::lock_guard<std::mutex> lock(state_mu_);
    return inbox_.moving();
  }

  uint32_t next_id() {
    uint32_t id = next_id_.fetch_add(1);
    if (id == 0) id = next_id_.fetch_add(1);  // 0 is for server-pushed messages
    return id;
  }

  // Notes what a resume needs to know, when the client can fail over.
  template <class F>
  void book(F note) {
    if (!inbox_.failover()) return;
    std::lock_guard<std::mutex> lock(state_mu_);
    note();
  }

  // ---- failover ------------------------------------------------------------

  // Starts the thread that finds the next server, unless it runs. Caller
  // holds state_mu_.
  void start_moving() {
    moving_.store(true, std::memory_order_relaxed);
    if (mover_running_ || closing_) return;
    if (mover_.joinable()) mover_.join();  // it ended: it took no lock since
    mover_running_ = true;
    mover_ = std::thread([this] { move_on(); });
  }

  void move_on() {
    for (;;) {
      Status why;
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        why = inbox_.lost();
      }
      const Status s = find_next_server(why);
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        if (!s.ok()) inbox_.break_with(s);
        if (!inbox_.moving()) {  // else lost again while writing: go on
          moving_.store(false, std::memory_order_relaxed);
          mover_running_ = false;
          cv_.notify_all();
          return;
        }
      }
    }
  }

  // Until failover_timeout: asks the locator, dials, greets and resumes,
  // then takes the new connection up. The refusals no other server would
  // answer otherwise (a token, a resume refused with a message) end it at once.
  Status find_next_server(const Status& why) {
    const auto start = Clock::now();
    const auto deadline = after(options_.failover_timeout);
    std::string who;
    std::string was;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      who = book_.who();
      was = current_;
    }
    log().warn("{}lost the rendezvous server at {} ({}); looking for the next one",
               who.empty() ? "" : who + ": ", was, why.message);
    Backoff backoff;
    int attempts = 0;
    Status last;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(state_mu_);
        if (closing_)
          return make_status(CC_ERR_RENDEZVOUS, "the client was closed during a failover");
      }
      ++attempts;
      last = try_next_server(deadline);
      if (last.ok()) {
        log().info("{}resumed on the rendezvous server at {} after {} ms",
                   who.empty() ? "" : who + ": ", current(), elapsed_ms(start));
        return last;
      }
      log().debug("failover attempt {}: {}", attempts, last.message);
      if (last.code == CC_ERR_AUTH || last.code == CC_ERR_MISMATCH ||
          last.code == CC_ERR_PEER_FAILED || last.code == CC_ERR_INVALID_USAGE)
        break;
      // The agent said why it cannot go on, or is gone with its cc-run.
      if (!options_.agent_socket.empty() && (refused_ || !dialled_agent_)) break;
      if (!backoff.sleep_until_next(deadline)) break;
    }
    const bool refused = last.code == CC_ERR_AUTH || last.code == CC_ERR_MISMATCH ||
                         last.code == CC_ERR_PEER_FAILED || last.code == CC_ERR_INVALID_USAGE ||
                         (!options_.agent_socket.empty() && refused_);
    return make_status(
        refused ? last.code : CC_ERR_RENDEZVOUS,
        (who.empty() ? std::string("this client") : who) + " on host " + local_hostname() +
            " lost the rendezvous server at " + was + " (" + why.message + ") and " +
            (refused ? "the next server refused to take it up: " + last.message
                     : "could not resume on a next one within " +
                           std::to_string(elapsed_ms(start)) + " ms (" + std::to_string(attempts) +
                           " attempt" + (attempts == 1 ? "" : "s") + "; the last: " +
                           last.message + ")") +
            ". Check that a successor rendezvous server runs and is reachable (cc-rendezvous, or "
            "the job's etcd election), or raise the failover timeout");
  }

  std::string current() {
    std::lock_guard<std::mutex> lock(state_mu_);
    return current_;
  }

  // One attempt: where is the server, a connection to it, the handshake and
  // every resume; success once the connection is taken up.
  Status try_next_server(Clock::time_point deadline) {
    refused_ = false;
    if (!options_.agent_socket.empty()) return try_agent_again(deadline);
    const auto until = std::min(deadline, Clock::now() + kAttemptCap);
    std::string host;
    int port = 0;
    if (Status s = options_.locate(until, &host, &port); !s.ok()) return s;
    if (host.empty() || port < 1 || port > 65535)
      return make_status(CC_ERR_RENDEZVOUS, "the locator named no server ('" + host + "', port " +
                                                std::to_string(port) + ")");
    FrameClientOptions o = options_;
    o.addr = host;
    o.port = port;
    const std::string endpoint =
        options_.name.empty() ? make_endpoint(host, port)
                              : options_.name + " (its server at " + make_endpoint(host, port) + ")";
    Fd dialled;
    if (Status s = dial_tcp(o, endpoint, std::min(until, Clock::now() + kRelocateEvery), &dialled);
        !s.ok())
      return s;
    Conn fd;
    if (Status s = secure(std::move(dialled), o, host, endpoint, until, &fd); !s.ok()) return s;
    std::vector<PeerEvent> events;
    if (Status s = greet(fd, endpoint, until, &events); !s.ok()) return s;
    take_up(std::move(fd), endpoint, std::move(events));
    return Status::success();
  }

  // Through the node agent: the same socket again, and the hello waits there
  // (up to the whole failover) until the agent reached the next server.
  Status try_agent_again(Clock::time_point deadline) {
    dialled_agent_ = false;
    Fd dialled;
    if (Status s = dial_agent(options_, endpoint_, std::min(deadline, Clock::now() + kAttemptCap),
                              &dialled);
        !s.ok())
      return s;
    dialled_agent_ = true;
    Conn fd;
    fd.fd = std::move(dialled);
    std::vector<PeerEvent> events;
    if (Status s = greet(fd, endpoint_, deadline, &events); !s.ok()) return s;
    take_up(std::move(fd), endpoint_, std::move(events));
    return Status::success();
  }

  // Sends one request on the new connection and reads until its answer;
  // the events that come first are kept for the inbox.
  Status ask(const Conn& fd, const std::string& endpoint, Clock::time_point until, const Message& request,
             std::vector<PeerEvent>* events, Message* reply) {
    const uint32_t id = next_id();
    if (Status s = write_all_by(fd, encode_frame(id, request), until, endpoint); !s.ok())
      return s;
    for (;;) {
      FrameReader::Frame f;
      if (Status s = read_frame_by(fd, until, endpoint, &f); !s.ok()) return s;
      if (f.request_id == id) {
        if (auto* e = std::get_if<Error>(&f.message)) {
          refused_ = true;
          return server_error(*e, endpoint);
        }
        *reply = std::move(f.message);
        return Status::success();
      }
      if (f.request_id != 0) continue;
      if (auto* e = std::get_if<Error>(&f.message)) return server_error(*e, endpoint);
      if (auto* ev = std::get_if<PeerEvent>(&f.message)) {
        if (ev->kind == PeerEventKind::server_stopping)
          return make_status(CC_ERR_RENDEZVOUS,
                             "the rendezvous server at " + endpoint + " is stopping too");
        events->push_back(std::move(*ev));
      }
    }
  }

  // Hello (with this client's session), Auth when asked, and one Resume per
  // membership this connection held.
  Status greet(const Conn& fd, const std::string& endpoint, Clock::time_point until,
               std::vector<PeerEvent>* events) {
    Message reply;
    if (Status s = ask(fd, endpoint, until, hello(), events, &reply); !s.ok()) return s;
    const auto* challenge = std::get_if<Challenge>(&reply);
    if (challenge == nullptr) return unexpected(reply, "hello");
    if (challenge->auth_required) {
      if (options_.token.empty())
        return make_status(CC_ERR_AUTH, "the rendezvous at " + endpoint +
                                            " requires a token: set CC_RENDEZVOUS_TOKEN or "
                                            "CC_RENDEZVOUS_TOKEN_FILE (or the config's token)");
      const Auth auth{auth_mac(options_.token, challenge->nonce, options_.job_id)};
      if (Status s = ask(fd, endpoint, until, auth, events, &reply); !s.ok()) return s;
      if (!std::holds_alternative<Ok>(reply)) return unexpected(reply, "auth");
    }
    std::vector<Resume> resumes;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      resumes = book_.resumes();
    }
    for (const Resume& r : resumes) {
      if (Status s = ask(fd, endpoint, until, r, events, &reply); !s.ok()) return s;
      if (!std::holds_alternative<Ok>(reply)) return unexpected(reply, "resume");
    }
    return Status::success();
  }

  // The new connection becomes the client's: every lock is taken, so no
  // frame is half written or half read across the swap. Then the requests
  // still awaited are written again with their ids.
  void take_up(Conn fd, const std::string& endpoint, std::vector<PeerEvent> events) {
    std::lock_guard<std::mutex> read_lock(read_mu_);
    std::lock_guard<std::mutex> write_lock(write_mu_);
    std::vector<std::pair<uint32_t, Message>> again;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      fd_ = std::move(fd);
      read_events_ = POLLIN;
      current_ = endpoint;
      inbox_.resumed(endpoint);
      for (PeerEvent& e : events) inbox_.queue_event(std::move(e));
      again = book_.to_send_again(Clock::now());
      last_heard_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    }
    for (const auto& [id, request] : again) {
      if (!send_all(encode_frame(id, request), after(options_.request_timeout), "a request")
               .ok())
        break;  // lost again: move_on goes on
    }
    cv_.notify_all();
  }

  Conn fd_;
  short read_events_ = POLLIN;  // what the next read waits for (TLS may want to write)
  FrameClientOptions options_;
  std::string endpoint_;  // the first server's, for messages
  std::string current_;   // the server's now (under state_mu_)
  const std::vector<uint8_t> session_;
  std::atomic<uint32_t> next_id_{1};
  std::atomic<Clock::rep> last_heard_{Clock::now().time_since_epoch().count()};

  std::mutex write_mu_;
  std::mutex read_mu_;  // one thread at a time polls and reads the socket

  std::mutex state_mu_;
  std::condition_variable cv_;
  ClientInbox inbox_;  // under state_mu_
  ResumeBook book_;    // under state_mu_
  bool closing_ = false;         // under state_mu_: the destructor runs
  bool mover_running_ = false;   // under state_mu_
  // The mover's last attempt: a request refused with a message; the node
  // agent's socket reached (the mover's thread only).
  bool refused_ = false;
  bool dialled_agent_ = true;
  std::atomic<Clock::time_point> last_leader_check_{Clock::time_point()};
  std::atomic<bool> moving_{false};  // the inbox is moving (for last_heard)
  std::thread mover_;
};

// Asks the locator where the server is, again with backoff while it cannot
// say, until `deadline`.
Status locate_first(const FrameClientOptions& options, Clock::time_point deadline,
                    FrameClientOptions* out) {
  Backoff backoff;
  *out = options;
  for (;;) {
    Status s = options.locate(deadline, &out->addr, &out->port);
    if (s.ok()) return s;
    if (!backoff.sleep_until_next(deadline))
      return make_status(s.code == CC_SUCCESS ? CC_ERR_RENDEZVOUS : s.code,
                         "cannot find the rendezvous server: " + s.message);
  }
}

}  // namespace

Status connect_frame_client(const FrameClientOptions& given, std::unique_ptr<Client>* out) {
  if (Status s = check_job_id(given.job_id, "the job id"); !s.ok()) return s;
  FrameClientOptions options = given;
  const bool located = given.locate != nullptr && given.agent_socket.empty();
  const auto deadline = after(given.connect_timeout);
  std::string endpoint;
  Fd dialled;
  for (;;) {
    if (located) {
      if (Status s = locate_first(given, deadline, &options); !s.ok()) return s;
    }
    endpoint = options.name.empty() ? make_endpoint(options.addr, options.port)
                                    : options.name + " (its server at " +
                                          make_endpoint(options.addr, options.port) + ")";
    if (options.addr.empty()) {
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         "no rendezvous address given: set MASTER_ADDR (or pass an address)");
    }
    if ((options.port < 1 || options.port > 65535) &&
        !(options.port == 0 && !options.agent_socket.empty())) {
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         "the rendezvous port " + std::to_string(options.port) +
                             " is out of range 1..65535: check MASTER_PORT");
    }
    // A located address may name a leader that just died (its election key
    // outlives it by up to its lease): it is dialled for kRelocateEvery,
    // then the locator is asked again, as a failover does.
    const auto until = located ? std::min(deadline, Clock::now() + kRelocateEvery) : deadline;
    const Status s = options.agent_socket.empty() ? dial_tcp(options, endpoint, until, &dialled)
                                                  : dial_agent(options, endpoint, deadline, &dialled);
    if (s.ok()) break;
    if (!located || Clock::now() >= deadline) return s;
  }
  Conn fd;
  if (!options.agent_socket.empty()) {
    fd.fd = std::move(dialled);  // the node agent's Unix socket stays clear
  } else if (Status s = secure(std::move(dialled), options, options.addr, endpoint, deadline, &fd);
             !s.ok()) {
    return s;
  }
  auto client = std::make_unique<FrameClient>(
      std::move(fd), options,
      options.agent_socket.empty() ? endpoint : endpoint + " through cc-run's node agent");
  if (Status s = client->handshake(deadline); !s.ok()) {
    if (s.code == CC_ERR_TIMEOUT) {
      s.message = "the rendezvous at " + endpoint + " accepted the connection but did not finish " +
                  "the handshake in time: is it a cc rendezvous server, and not overloaded?";
    }
    return s;
  }
  client->enable_failover();
  *out = std::move(client);
  return Status::success();
}

}  // namespace cc::rv
