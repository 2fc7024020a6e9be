// One rank of a training job that survives many failures, without CUDA or
// NCCL: the shape of examples/train_recover.cu with the rendezvous store as
// its all-reduce, for a soak of many kills in CI (scripts/soak.sh). It joins
// through the library's rendezvous step (a replacement, started again by
// cc-run --max-restarts, joins the same way), watches its generation with the
// control channel and the watchdog, and after a failure regrows through the
// library's recovery step. Then every rank agrees on the last step all of
// them committed (one that committed a step more takes it back), takes the
// weights of the lowest rank that holds some, and does the failed step again.
//
// The "weights" are one 64-bit value; each step every rank contributes a
// value made from the weights, its rank and the step, and the weights become
// a hash of them and the sum of the contributions. So the final weights are
// bit-identical to a run without a failure exactly when every step was done
// once, by every rank, from the same weights.
//
//   soak_member [--steps N] [--step-ms MS] [--pace-while FILE]
//
// Rank, world size, rendezvous (cc's server, or etcd://...), job, timeout and
// heartbeats from the environment, as under cc-run. --step-ms: sleep after
// each step, while FILE exists with --pace-while. Its lines are
// train_recover's, with its --report-times lines:
//   rank R: timing: joined|rejoined|recovered generation G at NS ns
//   rank R: weights identical across N ranks after S steps (generation G); weights hash 0x...
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cc/cc.h"
#include "lib/comm/rendezvous_join.hpp"
#include "lib/comm/rendezvous_recover.hpp"
#include "lib/launch/config.hpp"
#include "lib/launch/env.hpp"
#include "lib/launch/host_name.hpp"
#include "lib/watch/control_channel.hpp"
#include "lib/watch/watchdog.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace rv = cc::rv;

constexpr int kAttempts = 10;  // recoveries broken by a further failure, in a row
constexpr milliseconds kWaitSlice{50};
constexpr milliseconds kExchangeDeadline{120000};

void say(const char* format, ...) __attribute__((format(printf, 1, 2)));
void say(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  std::printf("\n");
  std::fflush(stdout);
}

[[noreturn]] void fatal(const std::string& what) {
  std::fprintf(stderr, "soak_member: %s\n", what.c_str());
  std::exit(1);
}

long long wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string csv(const std::vector<int32_t>& v) {
  std::string out;
  for (int32_t x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

// One generation of the job this process is a member of, as a communicator
// holds it: its rendezvous connection, watched by the watchdog.
class Generation final : public cc::watch::Watched {
 public:
  Generation(std::unique_ptr<rv::Client> client, uint32_t join_number, uint32_t generation,
             int rank, int size)
      : client_(std::move(client)),
        join_number_(join_number),
        generation_(generation),
        rank_(rank),
        size_(size) {}
  ~Generation() override {
    cc::watch::Watchdog::instance().remove(this);
    channel_.reset();
    if (client_) (void)client_->leave_nowait();
  }

  void watch(const cc::watch::ChannelOptions& base) {
    cc::watch::ChannelOptions o = base;
    o.rank = rank_;
    o.comm_number = join_number_;
    o.generation = generation_;
    channel_ = std::make_unique<cc::watch::ControlChannel>(*client_, o);
    if (cc::Status st = channel_->start(); !st.ok()) fatal("the control channel: " + st.message);
    cc::watch::Watchdog::instance().add(this);
  }
  void watch_tick(Clock::time_point now) override {
    if (channel_->poll(now, 0)) failed_ = true;
  }
  void leave() {
    cc::watch::Watchdog::instance().remove(this);
    channel_.reset();
    if (client_) (void)client_->leave();
    client_.reset();
  }

  bool failed() const { return failed_; }
  uint32_t join_number() const { return join_number_; }
  uint32_t generation() const { return generation_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  std::unique_ptr<rv::Client> client_;
  std::unique_ptr<cc::watch::ControlChannel> channel_;
  uint32_t join_number_;
  uint32_t generation_;
  int rank_;
  int size_;
  std::atomic<bool> failed_{false};
};

struct Options {
  int steps = 200;
  int step_ms = 0;
  std::string pace_while;
};

// One training process: its weights, its generation and its store.
class Trainer {
 public:
  explicit Trainer(const Options& o) : o_(o) {}

  void start() {
    const auto env = cc::settings::process_env();
    cc::launch::LaunchInfo launch;
    if (cc::Status st = cc::launch::read_launch_info(env, &launch); !st.ok()) fatal(st.message);
    if (cc::Status st = cc::launch::resolve_config(nullptr, env, &config_); !st.ok())
      fatal(st.message);
    shard_ = launch.rank;
    world_ = launch.world_size;
    channel_.host = cc::launch::host_name();
    channel_.pid = static_cast<uint32_t>(getpid());
    channel_.interval = milliseconds(config_.heartbeat_ms);
    channel_.misses = config_.heartbeat_misses;
    channel_.server_in_rank0 = false;
    if (cc_store_connect(&store_, launch.master_addr.c_str(), launch.master_port,
                         config_.job_id.c_str(), nullptr) != CC_SUCCESS)
      fatal(std::string("cc_store_connect: ") + cc_last_error());

    cc::comm::RendezvousRequest req;
    if (cc::Status st = cc::rv::factory::parse_address(launch.master_addr, launch.master_port,
                                                       &req.address);
        !st.ok())
      fatal("MASTER_ADDR: " + st.message);
    req.config = config_;
    req.info = member_info(world_);
    req.deadline = Clock::now() + milliseconds(config_.timeout_ms);
    cc::comm::RendezvousResult joined;
    const cc::Status st = cc::comm::rendezvous_join(
        req,
        [](std::vector<uint8_t>* id) {
          id->assign(128, 0x5a);
          return cc::Status::success();
        },
        &joined);
    if (!st.ok()) fatal("the join: " + st.message);
    rendezvous_ = joined.rendezvous;
    seat_ = joined.seat;
    const int rank = joined.rank >= 0 ? joined.rank : shard_;
    gen_ = std::make_unique<Generation>(std::move(joined.client), joined.comm_number,
                                        joined.generation, rank, world_);
    gen_->watch(channel_);
    have_state_ = joined.generation == 0;  // a replacement takes its state from a survivor
    say("rank %d: timing: %s generation %u at %lld ns", shard_, have_state_ ? "joined" : "rejoined",
        joined.generation, wall_ns());
    if (!have_state_) {
      say("rank %d: a replacement (generation %u): taking the weights from a survivor", shard_,
          joined.generation);
      while (!agree()) next_generation();
    }
  }

  void train() {
    for (;;) {
      if (done_ < o_.steps) {
        if (step()) continue;
        say("rank %d: step %d failed (%s); recovering", shard_, done_,
            cc_result_string(CC_ERR_PEER_FAILED));
      } else if (all_identical()) {
        return;
      }
      do next_generation();
      while (!agree());
    }
  }

  int finish() {
    say("rank %d: weights %s across %d ranks after %d steps (generation %u); weights hash "
        "0x%016llx",
        shard_, identical_ ? "identical" : "DIFFER", gen_->size(), done_, gen_->generation(),
        static_cast<unsigned long long>(weights_));
    gen_->leave();
    cc_store_close(store_);
    return identical_ ? 0 : 1;
  }

 private:
  rv::MemberInfo member_info(int size) const {
    rv::MemberInfo info;
    info.rank = shard_;
    info.world_size = size;
    info.host = channel_.host;
    info.pid = channel_.pid;
    info.nccl_version = 22809;
    return info;
  }

  // Every member's `mine` under `tag` in this generation, in rank order; false
  // when the generation failed before all of them were there.
  bool exchange(const std::string& tag, const std::string& mine, std::vector<std::string>* all) {
    const std::string prefix = "soak/" + std::to_string(gen_->generation()) + "/" + tag + "/";
    const std::string own = prefix + std::to_string(gen_->rank());
    if (cc_store_set(store_, own.c_str(), mine.data(), mine.size()) != CC_SUCCESS)
      fatal(std::string("cc_store_set: ") + cc_last_error());
    all->clear();
    const auto deadline = Clock::now() + kExchangeDeadline;
    for (int r = 0; r < gen_->size(); ++r) {
      const std::string key = prefix + std::to_string(r);
      char buf[256];
      size_t len = 0;
      for (;;) {
        const cc_result_t got = cc_store_get(store_, key.c_str(), buf, sizeof buf, &len,
                                             static_cast<int>(kWaitSlice.count()));
        if (got == CC_SUCCESS) break;
        if (got != CC_ERR_TIMEOUT) fatal(std::string("cc_store_get: ") + cc_last_error());
        if (gen_->failed()) return false;
        if (Clock::now() > deadline)
          fatal("rank " + std::to_string(r) + " never sent " + key + " and did not fail");
      }
      all->emplace_back(buf, len);
    }
    return true;
  }

  bool step() {
    const uint64_t mine = mix(weights_ + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(shard_ + 1) +
                              static_cast<uint64_t>(done_));
    std::vector<std::string> all;
    if (!exchange("s" + std::to_string(done_), std::to_string(mine), &all)) return false;
    uint64_t sum = 0;
    for (const auto& a : all) sum += std::strtoull(a.c_str(), nullptr, 10);
    previous_ = weights_;
    weights_ = mix(weights_ ^ sum);
    // Every member has read step done_ - 2: each wrote done_ - 1 after it.
    const std::string old = "soak/" + std::to_string(gen_->generation()) + "/s" +
                            std::to_string(done_ - 2) + "/" + std::to_string(gen_->rank());
    if (done_ >= 2) cc_store_delete(store_, old.c_str());
    if (done_ % 20 == 0 && shard_ == 0) say("rank %d: step %3d: weights %016llx", shard_, done_,
                                            static_cast<unsigned long long>(weights_));
    ++done_;
    pace();
    return true;
  }

  void pace() const {
    if (o_.step_ms <= 0) return;
    if (!o_.pace_while.empty() && access(o_.pace_while.c_str(), F_OK) != 0) return;
    std::this_thread::sleep_for(milliseconds(o_.step_ms));
  }

  bool all_identical() {
    std::vector<std::string> all;
    if (!exchange("final", std::to_string(weights_), &all)) return false;
    identical_ = true;
    for (const auto& a : all) identical_ = identical_ && a == std::to_string(weights_);
    return true;
  }

  // The next generation by regrow, asked again while a further failure
  // breaks the attempt.
  void next_generation() {
    for (int attempt = 1; attempt <= kAttempts; ++attempt) {
      cc::comm::RecoverRequest req;
      req.rendezvous = rendezvous_;
      req.config = config_;
      req.info = member_info(gen_->size());
      req.info.comm_number = gen_->join_number();
      req.generation = gen_->generation();
      req.seat = seat_;
      req.kind = rv::RecoverKind::regrow;
      req.nranks = world_;
      req.deadline = Clock::now() + milliseconds(config_.timeout_ms);
      cc::comm::RecoverResult result;
      cc::Status st = cc::comm::rendezvous_recover(
          req,
          [this](std::vector<uint8_t>* id) {
            id->assign(128, static_cast<uint8_t>(shard_ + 1));
            return cc::Status::success();
          },
          &result);
      if (st.ok())
        st = cc::comm::new_generation_events(*result.client, req.kind, result.joined.generation);
      if (st.ok()) {
        const rv::Joined& j = result.joined;
        seat_ = j.seat;
        say("rank %d: regrown to generation %u: rank %d of %zu (ranks %s replaced)", shard_,
            j.generation, j.rank, rv::world_size_of(j), csv(j.failed).c_str());
        auto next = std::make_unique<Generation>(std::move(result.client), gen_->join_number(),
                                                 j.generation, j.rank,
                                                 static_cast<int>(rv::world_size_of(j)));
        next->watch(channel_);
        gen_ = std::move(next);  // leaving the failed one returns at once
        return;
      }
      if (result.client) (void)result.client->leave_nowait();
      say("rank %d: attempt %d failed (%s); again", shard_, attempt, st.message.c_str());
    }
    fatal("cc_comm_regrow failed " + std::to_string(kAttempts) + " times in a row");
  }

  // All ranks agree on the last step every one of them committed, and take
  // the weights of the lowest rank that holds some; false when the
  // generation failed first.
  bool agree() {
    std::ostringstream mine;
    if (have_state_)
      mine << done_ << " " << weights_ << " " << previous_;
    else
      mine << INT_MAX << " 0 0";
    std::vector<std::string> all;
    if (!exchange("agree", mine.str(), &all)) return false;
    // Each member's steps committed (INT_MAX: none, a replacement), its
    // weights, and its weights one step before.
    struct Held {
      long long done = INT_MAX;
      uint64_t weights = 0, previous = 0;
    };
    std::vector<Held> held(all.size());
    int step = INT_MAX, root = -1;
    for (size_t r = 0; r < all.size(); ++r) {
      std::istringstream in(all[r]);
      in >> held[r].done >> held[r].weights >> held[r].previous;
      if (held[r].done == INT_MAX) continue;
      if (root < 0) root = static_cast<int>(r);
      step = std::min(step, static_cast<int>(held[r].done));
    }
    if (root < 0) fatal("no rank holds weights: every rank was replaced at once");
    const Held& from = held[static_cast<size_t>(root)];
    const uint64_t root_weights = from.done == step ? from.weights : from.previous;
    say("rank %d: timing: recovered generation %u at %lld ns", shard_, gen_->generation(),
        wall_ns());
    if (have_state_) {
      const uint64_t at_step = done_ == step ? weights_ : previous_;
      if (done_ != step && done_ != step + 1)
        fatal("at step " + std::to_string(done_) + ", the others at " + std::to_string(step) +
              ": more than one apart");
      if (at_step != root_weights) fatal("its weights at step " + std::to_string(step) +
                                         " differ from rank " + std::to_string(root) + "'s");
    }
    weights_ = previous_ = root_weights;
    done_ = step;
    have_state_ = true;
    say("rank %d: going on from step %d with rank %d's weights", shard_, step, root);
    return true;
  }

  Options o_;
  cc::launch::ResolvedConfig config_;
  cc::watch::ChannelOptions channel_;
  cc_store_t store_ = nullptr;
  cc::rv::factory::Address rendezvous_;  // where the first generation joined
  std::vector<uint8_t> seat_;  // proves this rank in a regrow (rv::Joined::seat)
  int shard_ = 0;  // the rank it was started with
  int world_ = 0;
  std::unique_ptr<Generation> gen_;
  bool have_state_ = true;
  bool identical_ = false;
  int done_ = 0;  // steps committed
  uint64_t weights_ = 0x0123456789abcdefull, previous_ = 0x0123456789abcdefull;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      o.steps = std::atoi(argv[++i]);
    } else if (a == "--step-ms" && i + 1 < argc) {
      o.step_ms = std::atoi(argv[++i]);
    } else if (a == "--pace-while" && i + 1 < argc) {
      o.pace_while = argv[++i];
    } else if (a == "--report-times") {
      // always on: the soak's driver passes it as to train_recover
    } else {
      std::fprintf(stderr, "usage: soak_member [--steps N] [--step-ms MS] [--pace-while FILE]\n");
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Trainer t(parse(argc, argv));
  t.start();
  t.train();
  return t.finish();
}
