#include "rendezvous/factory/elected.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <mutex>
#include <thread>

#include "common/log.hpp"
#include "common/unique_fd.hpp"
#include "rendezvous/election.hpp"
#include "rendezvous/etcd/connect.hpp"
#include "rendezvous/factory/etcd_options.hpp"
#include "rendezvous/server.hpp"
#include "rendezvous/tls/env.hpp"

namespace cc::rv::factory {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a client looks again while no leader is published (a failover).
constexpr milliseconds kRetry{200};
// How long the host waits for the job's other members to leave before it
// stops its server, so a job that ends together needs no failover.
constexpr milliseconds kHostLinger{5000};

// "host:port" or "[v6]:port", as a leader publishes it.
bool split_host_port(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  const char* b = text.data() + colon + 1;
  const char* e = text.data() + text.size();
  auto [end, ec] = std::from_chars(b, e, p);
  if (ec != std::errc() || end != e || p < 1 || p > 65535) return false;
  *host = h;
  *port = p;
  return true;
}

// This host's address on the route to `host`: what the job's other
// processes, which reach the same etcd, can most likely reach.
std::string route_to(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    return "127.0.0.1";
  std::string out = "127.0.0.1";
  UniqueFd fd(::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (fd.get() >= 0 && ::connect(fd.get(), found->ai_addr, found->ai_addrlen) == 0 &&
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    char text[INET6_ADDRSTRLEN] = {};
    if (local.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, text, sizeof(text));
      out = std::string("[") + text + "]";
    } else {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, text, sizeof(text));
      out = text;
    }
  }
  freeaddrinfo(found);
  return out;
}

// A free TCP port, held bound until the server takes it.
Status reserve_port(UniqueFd* fd, int* port) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(a);
  if (s.get() < 0 || ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return make_status(CC_ERR_SYSTEM, "cannot find a free port for the job's rendezvous server");
  *port = ntohs(a.sin_port);
  *fd = std::move(s);
  return Status::success();
}

class ElectedServerImpl final : public ElectedServer {
 public:
  ElectedServerImpl(std::unique_ptr<Election> election, const Address& address, Options options)
      : election_(std::move(election)),
        address_(address.text()),
        options_(std::move(options)),
        advertise_(address_toward(address)) {}

  ~ElectedServerImpl() override { stop_hosting(true); }

  Status locate(Clock::time_point deadline, std::string* host, int* port) override {
    std::lock_guard<std::mutex> lock(mu_);
    Status last;
    bool daemons = false;
    bool asked_daemons = false;
    while (true) {
      if (server_) {
        if (leadership_->leading()) {
          *host = "127.0.0.1";
          *port = server_->port();
          return Status::success();
        }
        stop_hosting(false);
      }
      std::string published;
      last = election_->leader("", deadline, &published);
      if (last.ok() && published.empty() && !options_.job_id.empty())
        last = election_->leader(options_.job_id, deadline, &published);
      if (last.ok() && !published.empty()) {
        if (split_host_port(published, host, port)) return Status::success();
        log().warn("rendezvous: etcd names '{}' as the job's server, which is not host:port",
                   published);
      }
      if (last.ok() && published.empty() && !asked_daemons) {
        last = election_->daemons_serve(deadline, &daemons);
        asked_daemons = last.ok();
      }
      if (last.ok() && published.empty() && !daemons && !options_.job_id.empty()) {
        last = campaign(deadline);
        if (last.ok() && server_) continue;
      }
      if (Clock::now() + kRetry >= deadline) break;
      std::this_thread::sleep_for(kRetry);
    }
    if (!last.ok()) return last;
    return make_status(
        CC_ERR_TIMEOUT,
        fmt::format("no rendezvous server for job '{}' was found in {} ({}) in time: {}",
                    options_.job_id, election_->where(), address_,
                    daemons ? "the cc-rendezvous daemons that serve it have no leader; start "
                              "one (cc-rendezvous --etcd " +
                                  address_ + ")"
                            : "none was elected; check that etcd is healthy"));
  }

  bool hosting() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return server_ != nullptr;
  }

 private:
  // One try to lead the job; when won, the server is started and published.
  Status campaign(Clock::time_point deadline) {
    UniqueFd reserved;
    int port = 0;
    if (Status s = reserve_port(&reserved, &port); !s.ok()) return s;
    const std::string published = fmt::format("{}:{}", advertise_, port);
    std::unique_ptr<Leadership> won;
    if (Status s = election_->campaign(options_.job_id, published, deadline, &won); !s.ok())
      return s;
    if (!won) return Status::success();
    std::shared_ptr<Leadership> leadership(std::move(won));
    ServerOptions so;
    so.bind_addr = "0.0.0.0";
    so.port = port;
    so.token = options_.token;
    // TLS when this process has a certificate and key; the name published
    // (advertise_) must be one its certificate carries.
    const tls::ServerFiles tls_files =
        options_.tls_server
            ? *options_.tls_server
            : tls::server_files_from(options_.getenv ? options_.getenv : settings::process_env());
    if (Status s = tls::server_context_for(tls_files, &so.tls); !s.ok()) return s;
    so.durable = leadership;
    so.successor = true;  // the job's clients may come back from a leader that went
    so.still_leading = [l = std::weak_ptr<Leadership>(leadership)] {
      auto held = l.lock();
      return held && held->leading();
    };
    reserved = UniqueFd();
    std::unique_ptr<Server> server;
    if (Status s = Server::start(so, &server); !s.ok()) {
      leadership->resign();
      return s;
    }
    std::shared_ptr<Server> shared(std::move(server));
    leadership->on_lost([s = std::weak_ptr<Server>(shared)] {
      if (auto held = s.lock()) held->abandon();
    });
    log().info("rendezvous: this process hosts job '{}''s server at {}", options_.job_id,
               published);
    leadership_ = std::move(leadership);
    server_ = std::move(shared);
    return Status::success();
  }

  void stop_hosting(bool linger) {
    if (!server_) return;
    if (linger && leadership_->leading()) server_->wait_job_idle(options_.job_id, kHostLinger);
    server_->stop();
    leadership_->resign();
    server_.reset();
    leadership_.reset();
  }

  mutable std::mutex mu_;
  std::unique_ptr<Election> election_;
  std::string address_;
  Options options_;
  std::string advertise_;
  std::shared_ptr<Leadership> leadership_;
  std::shared_ptr<Server> server_;
};

}  // namespace

std::string address_toward(const Address& etcd) {
  etcd::Address parsed;
  if (!etcd::parse_address(etcd.text(), &parsed).ok() || parsed.endpoints.empty())
    return "127.0.0.1";
  return route_to(parsed.endpoints[0].host, parsed.endpoints[0].port);
}

Status open_election(const Address& address, const Options& options,
                     std::unique_ptr<Election>* out) {
  etcd::ElectionOptions eo;
  if (Status s = etcd_options(address, options, &eo); !s.ok()) return s;
  return etcd::open_election_plugin(eo, Clock::now() + options.connect_timeout, out);
}

Status ElectedServer::open(const Address& address, const Options& options,
                           std::shared_ptr<ElectedServer>* out) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<ElectedServer>> opened;
  etcd::ElectionOptions eo;
  if (Status s = etcd_options(address, options, &eo); !s.ok()) return s;
  const std::string key = address.text() + "\n" + eo.prefix + "\n" + options.job_id;
  std::lock_guard<std::mutex> lock(mu);
  if (auto held = opened[key].lock()) {
    *out = held;
    return Status::success();
  }
  std::unique_ptr<Election> election;
  if (Status s = open_election(address, options, &election); !s.ok()) return s;
  auto made = std::make_shared<ElectedServerImpl>(std::move(election), address, options);
  opened[key] = made;
  *out = made;
  return Status::success();
}

}  // namespace cc::rv::factory
