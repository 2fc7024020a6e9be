#include "rendezvous/etcd/client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <httplib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "common/backoff.hpp"
#include "common/log.hpp"
#include "common/sigpipe_blocked.hpp"
#include "rendezvous/etcd/wire.hpp"

namespace cc::rv::etcd {
namespace {

using json = nlohmann::json;
using namespace wire;
using std::chrono::milliseconds;

constexpr size_t kMaxIdlePerEndpoint = 8;
constexpr int kMaxReauth = 2;
// gRPC metadata "hasleader: true" through the gateway: a member without a
// leader refuses requests at once (so the next endpoint is tried) rather
// than holding them.
constexpr const char* kRequireLeader = "Grpc-Metadata-hasleader";

// ClientOptions::local_address as a socket address with port 0; false when it
// is not an IPv4 or IPv6 literal.
bool parse_local_address(const std::string& text, sockaddr_storage* out, socklen_t* len) {
  *out = {};
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  if (::inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    *len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (::inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    *len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

// Binds a socket about to connect to `local` (port 0). The port is left to
// connect (IP_BIND_ADDRESS_NO_PORT), which picks one unique for the whole
// connection rather than one free on the address for every destination. A
// failure is logged and the connection comes from the kernel's choice.
void bind_before_connect(int fd, const sockaddr_storage& local, socklen_t len,
                         const std::string& text) {
  const int on = 1;
  (void)::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof(on));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&local), len) != 0)
    log().warn("cannot connect to etcd from {}: bind: {}", text, std::strerror(errno));
}

long long ms_until(Deadline d) {
  return std::chrono::duration_cast<milliseconds>(d - Clock::now()).count();
}

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

// ---- what an answer means

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// etcd errors that one member gives while another may do better, or that pass
// once a new leader is elected.
bool transient_etcd_error(int grpc_code, const std::string& message) {
  return grpc_code == 14 /* Unavailable */ || grpc_code == 4 /* DeadlineExceeded */ ||
         contains(message, "leader changed") || contains(message, "no leader") ||
         contains(message, "request timed out") || contains(message, "too many requests") ||
         contains(message, "not capable") || contains(message, "stopped");
}

std::string describe_transport(httplib::Error e, long long waited_ms, long long limit_ms,
                               const ClientOptions& o, const Endpoint& ep) {
  switch (e) {
    case httplib::Error::Connection:
      return "cannot connect (connection refused or host unreachable)";
    case httplib::Error::ConnectionTimeout:
      return "no answer to the connection within " + std::to_string(limit_ms) + " ms";
    case httplib::Error::Read:
      return waited_ms + 20 >= limit_ms ? "no answer within " + std::to_string(limit_ms) + " ms"
                                        : "the connection broke before the answer came";
    case httplib::Error::Write:
      return "the connection broke while the request was sent";
    case httplib::Error::SSLConnection:
      return "the TLS handshake failed (is this an etcds:// endpoint, with a certificate etcd "
             "accepts?)";
    case httplib::Error::SSLLoadingCerts:
      return "cannot load the CA file '" + o.ca_file + "' or the client certificate";
    case httplib::Error::SSLServerVerification:
      return "its TLS certificate was not signed by the CA in '" +
             (o.ca_file.empty() ? std::string("the system's CA store") : o.ca_file) +
             "' or does not name " + ep.host;
    case httplib::Error::Canceled:
      return "cancelled";
    default:
      return "HTTP client error '" + httplib::to_string(e) + "'";
  }
}

std::string strip_line_end(std::string s) {
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  return s;
}

}  // namespace

// ---- public helpers ----------------------------------------------------------

std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

namespace {

// A comparison of one key's `target` (equal, the default result).
Compare compare_on(std::string key, Compare::Target target) {
  Compare c;
  c.key = std::move(key);
  c.target = target;
  return c;
}

// An operation on one key, or on every key under it (`prefix`).
Op key_op(Op::Kind kind, std::string key, bool prefix) {
  Op op;
  op.kind = kind;
  if (prefix) op.range_end = prefix_end(key);
  op.key = std::move(key);
  return op;
}

}  // namespace

Compare Compare::absent(std::string key) {
  Compare c = compare_on(std::move(key), Target::create);
  c.number = 0;
  return c;
}

Compare Compare::value_is(std::string key, std::string value) {
  Compare c = compare_on(std::move(key), Target::value);
  c.value = std::move(value);
  return c;
}

Compare Compare::mod_revision_is(std::string key, int64_t revision) {
  Compare c = compare_on(std::move(key), Target::mod);
  c.number = revision;
  return c;
}

Op Op::put(std::string key, std::string value, int64_t lease, bool prev_kv) {
  Op op = key_op(Kind::put, std::move(key), false);
  op.value = std::move(value);
  op.lease = lease;
  op.prev_kv = prev_kv;
  return op;
}

Op Op::get(std::string key) { return key_op(Kind::range, std::move(key), false); }

Op Op::get_prefix(std::string prefix, bool keys_only) {
  Op op = key_op(Kind::range, std::move(prefix), true);
  op.keys_only = keys_only;
  return op;
}

Op Op::del(std::string key) { return key_op(Kind::del, std::move(key), false); }

Op Op::del_prefix(std::string prefix) { return key_op(Kind::del, std::move(prefix), true); }

// ---- the client ----------------------------------------------------------------

struct Client::Impl {
  ClientOptions opt;
  std::string user, password;  // from the auth file
  std::atomic<size_t> preferred{0};
  std::atomic<int> members{0};

  std::mutex token_mu;
  std::string token;
  uint64_t token_epoch = 0;  // bumped on every new token

  std::mutex pool_mu;
  std::vector<std::vector<std::unique_ptr<httplib::ClientImpl>>> idle;

  sockaddr_storage local{};  // opt.local_address, parsed (local_len 0: none)
  socklen_t local_len = 0;

  // The outcome of one request on one endpoint.
  struct Attempt {
    enum class Kind { ok, retry, reauth, fatal } kind = Kind::ok;
    json body;
    std::string error;       // retry: what went wrong there
    bool answered = false;   // retry: etcd runs there (it answered, or took the connection)
    bool timed_out = false;  // retry: it took the request and did not answer in time
    Status status;           // fatal
  };

  std::string where() const { return "etcd at " + opt.address.endpoint_list(); }

  // Reads an answer with `parse`; one it cannot read is an error that says
  // `what` it was.
  template <class T>
  Status read_answer(const json& resp, T (*parse)(const json&), const char* what, T* out) const {
    try {
      *out = parse(resp);
    } catch (const std::exception& e) {
      return make_status(CC_ERR_RENDEZVOUS,
                         where() + " sent " + what + " we cannot read: " + e.what());
    }
    return Status::success();
  }

  std::unique_ptr<httplib::ClientImpl> connect_to(size_t ep) {
    const Endpoint& e = opt.address.endpoints[ep];
    std::unique_ptr<httplib::ClientImpl> c;
    if (opt.address.tls) {
      std::unique_ptr<httplib::SSLClient> s;
      if (!opt.cert_file.empty())
        s = std::make_unique<httplib::SSLClient>(e.host, e.port, opt.cert_file, opt.key_file);
      else
        s = std::make_unique<httplib::SSLClient>(e.host, e.port);
      if (!opt.ca_file.empty()) s->set_ca_cert_path(opt.ca_file);
      s->enable_server_certificate_verification(true);
      c = std::move(s);
    } else {
      c = std::make_unique<httplib::ClientImpl>(e.host, e.port);
    }
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    if (local_len != 0)
      c->set_socket_options([local = local, len = local_len, text = opt.local_address](int fd) {
        bind_before_connect(fd, local, len, text);
      });
    return c;
  }

  std::unique_ptr<httplib::ClientImpl> borrow(size_t ep) {
    {
      std::lock_guard<std::mutex> lock(pool_mu);
      auto& v = idle[ep];
      if (!v.empty()) {
        auto c = std::move(v.back());
        v.pop_back();
        return c;
      }
    }
    return connect_to(ep);
  }

  void give_back(size_t ep, std::unique_ptr<httplib::ClientImpl> c) {
    std::lock_guard<std::mutex> lock(pool_mu);
    if (idle[ep].size() < kMaxIdlePerEndpoint) idle[ep].push_back(std::move(c));
  }

  void heard() {
  }

  static void set_timeouts(httplib::ClientImpl& c, Deadline until, milliseconds connect_cap) {
    const auto left = std::max<milliseconds>(
        milliseconds(1), std::chrono::duration_cast<milliseconds>(until - Clock::now()));
    c.set_connection_timeout(std::min(left, connect_cap));
    c.set_read_timeout(left);
    c.set_write_timeout(left);
  }

  // What an HTTP answer with a gRPC error means for the request.
  Attempt classify_error(int http_status, const std::string& body, const std::string& what) {
    Attempt a;
    json j = json::parse(body, nullptr, false);
    int code = 0;
    std::string message;
    if (j.is_object()) {
      const json* e = &j;
      if (auto inner = j.find("error"); inner != j.end() && inner->is_object())
        e = &*inner;  // a stream's error
      code = static_cast<int>(num(*e, "code"));
      if (code == 0) code = static_cast<int>(num(*e, "grpc_code"));
      message = text(*e, "message");
      if (message.empty()) message = text(*e, "error");
    }
    if (message.empty()) {
      if (http_status == 404) {
        a.kind = Attempt::Kind::fatal;
        a.status =
            make_status(CC_ERR_RENDEZVOUS,
                        where() + ": the endpoint does not serve etcd's v3 API (HTTP 404 for " +
                            what + "): is this etcd's client port, and etcd 3.4 or newer?");
        return a;
      }
      a.kind = http_status >= 500 ? Attempt::Kind::retry : Attempt::Kind::fatal;
      a.answered = true;
      a.error = "HTTP " + std::to_string(http_status) + " without an etcd error";
      a.status = make_status(CC_ERR_RENDEZVOUS, where() + " answered " + what + " with HTTP " +
                                                    std::to_string(http_status) + ": " +
                                                    body.substr(0, 200));
      return a;
    }
    const std::string m = lower(message);
    if (contains(m, "invalid auth token") || contains(m, "revision in header is old")) {
      a.kind = Attempt::Kind::reauth;
      a.error = message;
      return a;
    }
    if (transient_etcd_error(code, m) || http_status >= 500) {
      a.kind = Attempt::Kind::retry;
      a.answered = true;
      a.error = message;
      return a;
    }
    a.kind = Attempt::Kind::fatal;
    if (contains(m, "user name is empty")) {
      a.status =
          make_status(CC_ERR_AUTH, where() + " has authentication enabled and refused " + what +
                                       " without a user: put 'user:password' in a file readable "
                                       "only by you and name it with CC_ETCD_AUTH_FILE");
    } else if (contains(m, "authentication failed")) {
      a.status =
          make_status(CC_ERR_AUTH, where() + " refused the user '" + user + "' of the auth file '" +
                                       opt.auth_file + "': " + message +
                                       ". Check the user and password in that file (one line, "
                                       "user:password)");
    } else if (contains(m, "authentication is not enabled")) {
      a.status = make_status(CC_ERR_AUTH,
                             where() + " has authentication disabled, but an auth file ('" +
                                 opt.auth_file +
                                 "') was given: unset CC_ETCD_AUTH_FILE, or enable auth in etcd");
    } else if (contains(m, "permission denied")) {
      a.status = make_status(
          CC_ERR_AUTH, where() + " refused " + what + " to the user '" + user + "': " + message +
                           ". Give that user a role with readwrite permission on the "
                           "rendezvous prefix (etcdctl role grant-permission --prefix)");
    } else {
      a.status = make_status(CC_ERR_RENDEZVOUS, where() + " refused " + what + ": " + message);
    }
    return a;
  }

  struct Raw {
    int status = 0;  // 0: no answer
    std::string body;
    httplib::Error error = httplib::Error::Success;
  };

  // One POST, its body read through a receiver rather than by the library:
  // etcd's gateway ends a gRPC error's chunked body with HTTP trailers, which
  // cpp-httplib 0.11 reports as a read error after the whole body arrived.
  // With the receiver the status and body are kept; a body cut short fails
  // to parse later and is treated as no answer.
  static Raw post(httplib::ClientImpl& c, const std::string& path, httplib::Headers headers,
                  const std::string& body) {
    Raw raw;
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.headers = std::move(headers);
    req.body = body;
    req.response_handler = [&](const httplib::Response& r) {
      raw.status = r.status;
      return true;
    };
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      raw.body.append(data, len);
      return true;
    };
    httplib::Response res;
    const SigpipeBlocked sigpipe_blocked;  // a member gone mid-request is an error, not a death
    if (!c.send(req, res, raw.error) && raw.error == httplib::Error::Success)
      raw.error = httplib::Error::Unknown;
    if (raw.error != httplib::Error::Success && raw.status != 0 &&
        !json::accept(raw.body.substr(0, raw.body.find('\n'))))
      raw.status = 0;  // cut short: no answer
    return raw;
  }

  Attempt attempt(size_t ep, const std::string& path, const std::string& body,
                  const std::string& tok, Deadline until, const std::string& what) {
    Attempt a;
    auto conn = borrow(ep);
    if (!conn->is_valid()) {
      a.kind = Attempt::Kind::fatal;
      a.status =
          make_status(CC_ERR_INVALID_ARGUMENT,
                      where() + ": cannot set up TLS with the CA file '" + opt.ca_file +
                          "', client certificate '" + opt.cert_file + "' and key '" + opt.key_file +
                          "': check that they exist, are PEM files and belong together");
      return a;
    }
    set_timeouts(*conn, until, opt.connect_timeout);
    httplib::Headers headers{{"Host", opt.address.endpoints[ep].text()}, {kRequireLeader, "true"}};
    if (!tok.empty()) headers.emplace("Authorization", tok);
    headers.emplace("Content-Type", "application/json");
    const auto t0 = Clock::now();
    const long long limit = std::max<long long>(1, ms_until(until));
    Raw res = post(*conn, path, std::move(headers), body);
    if (res.status == 0) {
      a.kind = Attempt::Kind::retry;
      a.error = describe_transport(res.error, ms_since(t0), limit, opt, opt.address.endpoints[ep]);
      // Connected but no answer: etcd runs there and cannot serve (no leader, say).
      a.answered = res.error == httplib::Error::Read;
      a.timed_out = a.answered && ms_since(t0) + 20 >= limit;
      if (res.error == httplib::Error::SSLServerVerification ||
          res.error == httplib::Error::SSLLoadingCerts) {
        a.kind = Attempt::Kind::fatal;
        a.status = make_status(CC_ERR_RENDEZVOUS,
                               where() + ": " + opt.address.endpoints[ep].text() + ": " + a.error);
      }
      return a;  // the connection is dropped
    }
    heard();
    // After an answer with trailers the connection cannot be reused (see post).
    const bool reusable = res.error == httplib::Error::Success;
    if (res.status != 200) {
      a = classify_error(res.status, res.body, what);
      if (reusable) give_back(ep, std::move(conn));
      return a;
    }
    // A streaming method (lease keepalive) answers {"result": ...} or {"error": ...} lines.
    std::string first = res.body.substr(0, res.body.find('\n'));
    a.body = json::parse(first, nullptr, false);
    if (a.body.is_discarded() || !a.body.is_object()) {
      a.kind = Attempt::Kind::fatal;
      a.status = make_status(CC_ERR_RENDEZVOUS, where() + ": " + opt.address.endpoints[ep].text() +
                                                    " answered " + what +
                                                    " with something that is not "
                                                    "etcd's JSON: '" +
                                                    res.body.substr(0, 120) + "'");
      return a;
    }
    if (auto e = a.body.find("error"); e != a.body.end() && e->is_object()) {
      a = classify_error(static_cast<int>(num(*e, "http_code")), first, what);
      if (reusable) give_back(ep, std::move(conn));
      return a;
    }
    if (auto r = a.body.find("result"); r != a.body.end() && r->is_object()) a.body = json(*r);
    if (reusable) give_back(ep, std::move(conn));
    a.kind = Attempt::Kind::ok;
    return a;
  }

  // The token to send and the epoch it belongs to. When there is none, this
  // authenticates again and leaves *tok empty: the caller asks once more.
  Status current_token(Deadline deadline, std::string* tok, uint64_t* epoch) {
    {
      std::lock_guard<std::mutex> lock(token_mu);
      *tok = token;
      *epoch = token_epoch;
    }
    return tok->empty() ? reauthenticate(*epoch, deadline) : Status::success();
  }

  // A new token from /v3/auth/authenticate, unless another thread already
  // got one since `seen_epoch`.
  Status reauthenticate(uint64_t seen_epoch, Deadline deadline) {
    {
      std::lock_guard<std::mutex> lock(token_mu);
      if (token_epoch != seen_epoch) return Status::success();
    }
    json req{{"name", user}, {"password", password}};
    json resp;
    if (Status s = call("/v3/auth/authenticate", req, deadline, "authentication", &resp, false);
        !s.ok())
      return s;
    std::lock_guard<std::mutex> lock(token_mu);
    token = text(resp, "token");
    ++token_epoch;
    return Status::success();
  }

  Status quorum_words(const std::string& what, long long waited,
                      const std::vector<std::string>& errors, bool answered) {
    std::string each;
    for (size_t i = 0; i < errors.size(); ++i) {
      if (errors[i].empty()) continue;
      each += (each.empty() ? "" : "; ") + opt.address.endpoints[i].text() + ": " + errors[i];
    }
    std::string words = where() + " did not complete " + what + " within " +
                        std::to_string(waited) + " ms (" + each + ")";
    // The members etcd listed, else the endpoints given (usually all of them).
    const int known = members.load();
    const int m = known > 0 ? known : static_cast<int>(opt.address.endpoints.size());
    if (answered) {
      const std::string quorum = "a cluster of " + std::to_string(m) + " members" +
                                 (known > 0 ? "" : " (counting the endpoints given)") + " needs " +
                                 std::to_string(m / 2 + 1) +
                                 " of them (its quorum) running and in touch with each other";
      words +=
          ". Members that run did not serve it: etcd has lost its quorum or is electing a "
          "leader; " +
          quorum +
          ". Start the members that are down or mend the network between them, and check with "
          "'etcdctl endpoint status --cluster'";
    } else {
      words +=
          ". No endpoint answered: is etcd running there? Check the etcd:// address (MASTER_ADDR) "
          "and "
          "firewalls";
    }
    return make_status(CC_ERR_RENDEZVOUS, words);
  }

  // One request with failover until the deadline. with_token: send (and get
  // when needed) the auth token.
  // first_attempt: the first attempt's limit, when not opt.attempt_timeout.
  Status call(const std::string& path, const json& request, Deadline deadline,
              const std::string& what, json* out, bool with_token = true,
              milliseconds first_attempt = milliseconds(0)) {
    const std::string body = request.dump();
    const size_t n = opt.address.endpoints.size();
    const auto start = Clock::now();
    std::vector<std::string> errors(n);
    bool answered = false;
    size_t ep = preferred.load() % n;
    size_t tried_this_round = 0;
    Backoff backoff;  // after a round in which every endpoint failed
    // Each attempt that found its endpoint running but got no answer gives
    // the next one twice the time: a busy cluster is not made busier by
    // every request being sent again and again.
    milliseconds attempt_limit = first_attempt.count() > 0 ? first_attempt : opt.attempt_timeout;
    int reauths = 0;
    for (;;) {
      std::string tok;
      uint64_t epoch = 0;
      if (with_token && !user.empty()) {
        if (Status s = current_token(deadline, &tok, &epoch); !s.ok()) return s;
        if (tok.empty()) continue;  // authenticated again: take the new token
      }
      if (Clock::now() >= deadline) break;
      const Deadline until = std::min(deadline, Clock::now() + attempt_limit);
      Attempt a = attempt(ep, path, body, tok, until, what);
      switch (a.kind) {
        case Attempt::Kind::ok:
          preferred.store(ep);
          *out = std::move(a.body);
          return Status::success();
        case Attempt::Kind::fatal:
          return a.status;
        case Attempt::Kind::reauth:
          if (!with_token || user.empty()) {
            return make_status(CC_ERR_AUTH, where() + " has authentication enabled and refused " +
                                                what + " (" + a.error +
                                                "): name a file holding 'user:password' with "
                                                "CC_ETCD_AUTH_FILE");
          }
          if (++reauths > kMaxReauth) {
            return make_status(CC_ERR_AUTH, where() + " refused the token it gave the user '" +
                                                user + "' for " + what + ": " + a.error);
          }
          if (Status s = reauthenticate(epoch, deadline); !s.ok()) return s;
          continue;
        case Attempt::Kind::retry:
          errors[ep] = a.error;
          answered = answered || a.answered;
          if (a.timed_out) attempt_limit *= 2;
          break;
      }
      ep = (ep + 1) % n;
      if (++tried_this_round >= n) {
        tried_this_round = 0;
        if (!backoff.sleep_until_next(deadline)) break;
      }
    }
    return quorum_words(what, ms_since(start), errors, answered);
  }
};

// ---- Client --------------------------------------------------------------------

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

namespace {

Status check_readable(const std::string& path, const char* what, const char* variable) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_status(CC_ERR_INVALID_ARGUMENT, std::string("cannot read the etcd ") + what + " '" +
                                                    path + "' (" + variable +
                                                    "): " + std::strerror(errno) +
                                                    ". Check the path and its permissions");
  }
  return Status::success();
}

Status read_auth_file(const std::string& path, std::string* user, std::string* password) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "cannot read the etcd auth file '" + path + "' (CC_ETCD_AUTH_FILE): " +
                           std::strerror(errno) + ". Check the path and its permissions");
  }
  std::string line;
  std::getline(in, line);
  line = strip_line_end(line);
  const size_t colon = line.find(':');
  if (colon == std::string::npos || colon == 0) {
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "the etcd auth file '" + path +
                           "' (CC_ETCD_AUTH_FILE) must hold 'user:password' on its "
                           "first line");
  }
  *user = line.substr(0, colon);
  *password = line.substr(colon + 1);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    log().warn("the etcd auth file '{}' can be read by other users (mode {:o}): chmod 600 it", path,
               st.st_mode & 0777);
  }
  return Status::success();
}

}  // namespace

Status Client::create(ClientOptions options, std::unique_ptr<Client>* out) {
  if (options.address.endpoints.empty())
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "no etcd endpoint given: use etcd://host:port[,host:port...]");
  auto impl = std::make_unique<Impl>();
  if (!options.address.tls && (!options.ca_file.empty() || !options.cert_file.empty()))
    log().warn(
        "an etcd CA or client certificate was given for {}, which is not TLS: use etcds:// to use "
        "them",
        options.address.text());
  if (options.address.tls) {
    if (!options.ca_file.empty())
      if (Status s = check_readable(options.ca_file, "CA file", "CC_ETCD_CA_FILE"); !s.ok())
        return s;
    if (options.cert_file.empty() != options.key_file.empty())
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         "an etcd client certificate needs both a certificate file "
                         "(CC_ETCD_CERT_FILE) and its key (CC_ETCD_KEY_FILE)");
    if (!options.cert_file.empty()) {
      if (Status s = check_readable(options.cert_file, "client certificate", "CC_ETCD_CERT_FILE");
          !s.ok())
        return s;
      if (Status s = check_readable(options.key_file, "client key", "CC_ETCD_KEY_FILE"); !s.ok())
        return s;
    }
  }
  if (!options.auth_file.empty())
    if (Status s = read_auth_file(options.auth_file, &impl->user, &impl->password); !s.ok())
      return s;
  if (!options.local_address.empty() &&
      !parse_local_address(options.local_address, &impl->local, &impl->local_len))
    return make_status(CC_ERR_INVALID_ARGUMENT, "the local address for etcd connections '" +
                                                    options.local_address +
                                                    "' is not an IPv4 or IPv6 address");
  if (options.attempt_timeout.count() <= 0) options.attempt_timeout = milliseconds(2000);
  if (options.connect_timeout.count() <= 0) options.connect_timeout = milliseconds(2000);
  impl->idle.resize(options.address.endpoints.size());
  // Clients start at different endpoints, so many ranks spread their load
  // over the members (each member's gateway does the JSON work of its own
  // requests) rather than all asking the first.
  std::random_device rd;
  impl->preferred.store(rd() % options.address.endpoints.size());
  impl->opt = std::move(options);
  out->reset(new Client(std::move(impl)));
  return Status::success();
}

Status Client::check(Deadline deadline) {
  json resp;
  if (Status s =
          impl_->call("/v3/cluster/member/list", json::object(), deadline, "a member list", &resp);
      !s.ok())
    return s;
  if (auto m = resp.find("members"); m != resp.end() && m->is_array())
    impl_->members.store(static_cast<int>(m->size()));
  return Status::success();
}

Status Client::range(const std::string& key, const std::string& range_end, Deadline deadline,
                     RangeResult* out, bool keys_only, int64_t limit) {
  json resp;
  if (Status s = impl_->call("/v3/kv/range", range_json(key, range_end, keys_only, limit), deadline,
                             "a range read", &resp);
      !s.ok())
    return s;
  return impl_->read_answer(resp, parse_range, "a range", out);
}

Status Client::get(const std::string& key, Deadline deadline, std::optional<KeyValue>* out,
                   int64_t* revision) {
  RangeResult r;
  if (Status s = range(key, "", deadline, &r); !s.ok()) return s;
  if (revision != nullptr) *revision = r.revision;
  if (r.kvs.empty())
    out->reset();
  else
    *out = std::move(r.kvs.front());
  return Status::success();
}

Status Client::put(const std::string& key, const std::string& value, int64_t lease,
                   Deadline deadline, int64_t* revision) {
  json resp;
  Op op = Op::put(key, value, lease);
  if (Status s = impl_->call("/v3/kv/put", put_json(op), deadline, "a put", &resp); !s.ok())
    return s;
  if (revision != nullptr)
    *revision = resp.contains("header") ? num(resp["header"], "revision") : 0;
  return Status::success();
}

Status Client::delete_range(const std::string& key, const std::string& range_end, Deadline deadline,
                            int64_t* deleted) {
  json req{{"key", b64(key)}};
  if (!range_end.empty()) req["range_end"] = b64(range_end);
  json resp;
  if (Status s = impl_->call("/v3/kv/deleterange", req, deadline, "a delete", &resp); !s.ok())
    return s;
  if (deleted != nullptr) *deleted = num(resp, "deleted");
  return Status::success();
}

Status Client::txn(const Txn& t, Deadline deadline, TxnResult* out) {
  json resp;
  if (Status s = impl_->call("/v3/kv/txn", txn_json(t), deadline, "a transaction", &resp); !s.ok())
    return s;
  return impl_->read_answer(resp, parse_txn, "a transaction result", out);
}

Status Client::lease_grant(int64_t ttl_s, Deadline deadline, int64_t* id, int64_t* granted_ttl_s,
                           int64_t* revision) {
  json resp;
  if (Status s = impl_->call("/v3/lease/grant", json{{"TTL", std::to_string(ttl_s)}}, deadline,
                             "a lease grant", &resp);
      !s.ok())
    return s;
  if (std::string e = text(resp, "error"); !e.empty())
    return make_status(CC_ERR_RENDEZVOUS, impl_->where() + " refused a lease of " +
                                              std::to_string(ttl_s) + " s: " + e);
  *id = num(resp, "ID");
  if (granted_ttl_s != nullptr) *granted_ttl_s = num(resp, "TTL");
  if (revision != nullptr)
    *revision = resp.contains("header") ? num(resp["header"], "revision") : 0;
  return Status::success();
}

Status Client::lease_keepalive(int64_t id, Deadline deadline, int64_t* ttl_s, int64_t* revision) {
  json resp;
  if (Status s = impl_->call("/v3/lease/keepalive", json{{"ID", std::to_string(id)}}, deadline,
                             "a lease keepalive", &resp);
      !s.ok())
    return s;
  *ttl_s = num(resp, "TTL");
  if (revision != nullptr)
    *revision = resp.contains("header") ? num(resp["header"], "revision") : 0;
  return Status::success();
}

Status Client::lease_revoke(int64_t id, Deadline deadline) {
  json resp;
  Status s = impl_->call("/v3/lease/revoke", json{{"ID", std::to_string(id)}}, deadline,
                         "a lease revoke", &resp);
  if (!s.ok() && contains(lower(s.message), "lease not found")) return Status::success();
  return s;
}

const Address& Client::address() const { return impl_->opt.address; }
std::string Client::where() const { return impl_->where(); }
int Client::cluster_size() const { return impl_->members.load(); }
}  // namespace cc::rv::etcd
