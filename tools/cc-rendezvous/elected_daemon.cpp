#include "tools/cc-rendezvous/elected_daemon.hpp"

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/log.hpp"
#include "common/return_if_error.hpp"
#include "rendezvous/election.hpp"
#include "rendezvous/factory/address.hpp"
#include "rendezvous/factory/elected.hpp"

namespace cc::tools::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;

class Candidate final : public ElectedDaemon {
 public:
  Candidate(std::unique_ptr<rv::Election> election, rv::ServerOptions server, std::string published)
      : election_(std::move(election)), options_(std::move(server)), published_(std::move(published)) {
    thread_ = std::thread([this] { run(); });
  }

  ~Candidate() override { stop(); }

  void stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    end_term();
  }

  std::shared_ptr<rv::Server> server() override {
    std::lock_guard<std::mutex> lock(mu_);
    return server_;
  }

  bool set_tokens(const Tokens& tokens, std::chrono::milliseconds timeout) override {
    std::shared_ptr<rv::Server> now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      options_.token = tokens.admin;
      options_.job_tokens = tokens.jobs;
      now = server_;
    }
    return !now || now->set_tokens(tokens, timeout);
  }

 private:
  // Stands by and serves, term after term, until stop().
  void run() {
    const auto retry = std::max(std::chrono::milliseconds(100), election_->lease() / 4);
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      if (server_ && leadership_ && !leadership_->leading()) {
        lock.unlock();
        end_term();
        lock.lock();
        continue;
      }
      if (!server_) {
        lock.unlock();
        campaign();
        lock.lock();
      }
      cv_.wait_for(lock, retry, [this] { return stopping_; });
    }
  }

  void campaign() {
    std::unique_ptr<rv::Leadership> won;
    const Status s = election_->campaign("", published_, Clock::now() + election_->lease(), &won);
    if (!s.ok()) {
      log().warn("cc-rendezvous: campaign in {} failed: {}", election_->where(), s.message);
      return;
    }
    if (!won) return;  // another daemon leads: stand by
    std::shared_ptr<rv::Leadership> leadership(std::move(won));
    rv::ServerOptions so;
    {
      std::lock_guard<std::mutex> lock(mu_);
      so = options_;
    }
    so.durable = leadership;
    so.successor = true;  // clients of a leader that went resume here
    so.still_leading = [l = std::weak_ptr<rv::Leadership>(leadership)] {
      auto held = l.lock();
      return held && held->leading();
    };
    std::unique_ptr<rv::Server> started;
    if (Status st = rv::Server::start(so, &started); !st.ok()) {
      log().error("cc-rendezvous: elected, but cannot serve: {}; giving the lead up", st.message);
      leadership->resign();
      return;
    }
    std::shared_ptr<rv::Server> server(std::move(started));
    leadership->on_lost([this, s = std::weak_ptr<rv::Server>(server)] {
      if (auto held = s.lock()) held->abandon();
      cv_.notify_all();
    });
    log().info("cc-rendezvous: leading in {}; serving at {}", election_->where(), published_);
    std::lock_guard<std::mutex> lock(mu_);
    server_ = std::move(server);
    leadership_ = std::move(leadership);
  }

  void end_term() {
    std::shared_ptr<rv::Server> server;
    std::shared_ptr<rv::Leadership> leadership;
    {
      std::lock_guard<std::mutex> lock(mu_);
      server = std::move(server_);
      leadership = std::move(leadership_);
    }
    if (server) server->stop();
    if (leadership) leadership->resign();
    if (server) log().info("cc-rendezvous: no longer leading; standing by");
  }

  std::unique_ptr<rv::Election> election_;
  rv::ServerOptions options_;
  std::string published_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::shared_ptr<rv::Server> server_;
  std::shared_ptr<rv::Leadership> leadership_;
  std::thread thread_;
};

}  // namespace

Status ElectedDaemon::start(const ElectedOptions& options, const rv::ServerOptions& server,
                            std::unique_ptr<ElectedDaemon>* out) {
  rv::factory::Address address;
  CC_RETURN_IF_ERROR(rv::factory::parse_address(options.etcd, &address));
  if (address.server())
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       fmt::format("--etcd {} is not an etcd address: write "
                                   "etcd://host:port[,host:port...] (etcds:// for TLS)",
                                   options.etcd));
  if (server.port == 0)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "--etcd needs a fixed --port: clients find the leader by the address it "
                       "publishes");
  rv::factory::Options fo;
  fo.job_id.clear();
  fo.connect_timeout = options.connect_timeout;
  fo.lease = options.lease;
  std::unique_ptr<rv::Election> election;
  CC_RETURN_IF_ERROR(rv::factory::open_election(address, fo, &election));
  CC_RETURN_IF_ERROR(election->declare_daemons(Clock::now() + options.connect_timeout));
  std::string published = options.advertise;
  if (published.empty())
    published = fmt::format("{}:{}", rv::factory::address_toward(address), server.port);
  *out = std::make_unique<Candidate>(std::move(election), server, published);
  return Status::success();
}

}  // namespace cc::tools::rendezvous
