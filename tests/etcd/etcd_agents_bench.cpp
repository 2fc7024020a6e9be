// cc-etcd-agents-bench: a job of N nodes x R ranks on etcd through node
// agents, at full size on one machine. Each node is the real agent of
// cc-run (rendezvous/etcd/node_agent.hpp: the node's lease and keepalive,
// its ranks' claims batched, one watch stream), with its own etcd
// connections; rank 0 is a real rank (the etcd backend, which coordinates
// the join); the other ranks are simulated in memory, each doing what the
// backend of a rank behind an agent does (node_link.hpp): its claim through
// its agent, its generation's news and its neighbour's key through the
// agent's stream, and, when its neighbour's key goes with a lost node's
// lease, the announcement. Phases, each timed with etcd's CPU in it:
// the agents start; with --idle, a time of nothing but their keepalives;
// the join; one rank's death told to every rank (its agent reports the
// exit); a node that hangs (its agent stops its keepalives) told to every
// rank; a shrink after both, to its result told to every survivor (the real
// rank 0 coordinates; each simulated survivor's request goes through its
// agent, batched; not simulated: a real survivor's read of its own keys and
// its try at the coordinator key, two transactions of its own each).
//
// Without --address it starts a local etcd cluster of --members members on
// 127.0.0.1, as cc-etcd-rendezvous-bench does.
//
// The agents live in worker processes (--nodes-per-process each; the parent
// holds rank 0 and drives the phases over pipes, bench_workers.hpp): each
// agent holds two connections or more, and one process's open-file limit
// would bound the nodes. Each node's agent connects from a loopback address
// of its own (127.0.0.2 on), as nodes on different hosts do: from one
// address, the kernel's search for a free port among tens of thousands of
// connections to the same few ports was the largest cost of a run
// (--from-one-address measures that way).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/etcd/backend.hpp"
#include "rendezvous/etcd/keys.hpp"
#include "rendezvous/etcd/node_agent.hpp"
#include "rendezvous/etcd/records.hpp"
#include "rendezvous/etcd/wire.hpp"
#include "tests/etcd/bench_setup.hpp"
#include "tests/etcd/bench_workers.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace etcd = cc::rv::etcd;
namespace node = cc::rv::etcd::node;
using cc::test::cpu_seconds;

const char* kAbout =
    "Simulates a job of N nodes x R ranks on etcd through node agents: each node\n"
    "the real agent of cc-run with its own etcd connections, rank 0 a real rank,\n"
    "the others in memory. Prints each phase's wall time and etcd's CPU in it.";

// One process's share of the job: the agents of nodes [first_node,
// end_node) and their simulated ranks.
struct Sim {
  int nodes = 0, per_node = 0, world = 0;
  int first_node = 0, end_node = 0;
  std::string address, job;
  milliseconds window{5000};
  etcd::Keys keys{"bench", "x"};
  std::vector<std::unique_ptr<node::Agent>> agents;  // [n - first_node]

  std::mutex mu;
  std::condition_variable cv;
  int joined = 0;   // simulated ranks that have the result
  int claimed = 0;  // simulated ranks whose claim etcd took
  Clock::time_point all_claimed;
  int failures = 0;  // claims refused or failed
  std::string first_error;
  int victim = -1, lost_node = -1;
  int told_victim = 0, told_node = 0;  // simulated ranks told each departure
  int shrunk = 0;                      // simulated survivors that have the shrink's result
  std::deque<std::pair<int, etcd::MemberRecord>> to_announce;  // neighbour gone
  std::vector<uint8_t> saw_result;

  int node_of(int rank) const { return rank / per_node; }
  bool mine(int node) const { return node >= first_node && node < end_node; }
  node::Agent& agent(int node) { return *agents[static_cast<size_t>(node - first_node)]; }
  // The simulated ranks of this share (rank 0 is real, in the parent).
  int simulated() const { return (end_node - first_node) * per_node - (first_node == 0 ? 1 : 0); }
  std::string host(int n) const { return "node-" + std::to_string(n); }

  void fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (failures++ == 0) first_error = why;
    cv.notify_all();
  }

  // What a simulated rank's backend does with its generation's events.
  void on_events(int rank, const std::vector<cc::rv::etcd::WatchEvent>& evs) {
    const etcd::Gen g(1);
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& e : evs) {
      if (e.spec == 0 && e.kv.key == keys.result(g)) {
        if (!saw_result[static_cast<size_t>(rank)]) {
          saw_result[static_cast<size_t>(rank)] = 1;
          ++joined;
        }
      } else if (e.spec == 0 && e.kv.key == keys.events(g)) {
        etcd::Departure d;
        if (!etcd::decode(e.kv.value, &d)) continue;
        if (d.rank == victim) ++told_victim;
        if (lost_node >= 0 && node_of(d.rank) == lost_node && d.rank != victim) ++told_node;
      } else if (e.spec == 1 && e.type == cc::rv::etcd::WatchEvent::Type::del) {
        etcd::MemberRecord rec;
        if (e.prev_kv && etcd::decode(e.prev_kv->value, &rec))
          to_announce.emplace_back((rank + 1) % world, rec);
      }
    }
    cv.notify_all();
  }

  bool wait(const std::function<bool()>& done, milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, limit, [&] { return failures > 0 || done(); }) && failures == 0;
  }
};

etcd::MemberRecord record_of(const Sim& s, int rank, const std::string& node_words) {
  etcd::MemberRecord rec;
  rec.info.rank = rank;
  rec.info.world_size = s.world;
  rec.info.comm_number = 1;
  rec.info.host = s.host(s.node_of(rank));
  rec.info.pid = static_cast<uint32_t>(100000 + rank);
  rec.info.nccl_version = 22809;
  rec.info.gpu_uuid = "GPU-" + std::to_string(rank % s.per_node);
  rec.nonce = "sim-" + std::to_string(rank);
  rec.node = node_words;
  return rec;
}

// A simulated rank's claim through its agent, then its watch.
void claim(Sim& s, int rank) {
  node::Agent& agent = s.agent(s.node_of(rank));
  const etcd::Gen g(1);
  etcd::Txn t;
  t.compare = {etcd::Compare::absent(s.keys.member(g, rank)),
               etcd::Compare::absent(s.keys.result(g))};
  t.success = {etcd::Op::put(s.keys.member(g, rank), encode(record_of(s, rank, agent.node_words())),
                             agent.lease())};
  t.failure = {etcd::Op::get(s.keys.member(g, rank)), etcd::Op::get(s.keys.result(g))};
  agent.own(static_cast<node::RankId>(rank), s.keys.member(g, rank));
  agent.claim(etcd::wire::txn_json(t), [&s, &agent, rank, g](const cc::Status& st,
                                                             const std::string& text) {
    if (!st.ok()) return s.fail("rank " + std::to_string(rank) + ": " + st.message);
    etcd::TxnResult r;
    try {
      r = etcd::wire::parse_txn(nlohmann::json::parse(text));
    } catch (const std::exception& e) {
      return s.fail(e.what());
    }
    int64_t claimed = r.revision;
    if (!r.succeeded) {
      // Its own claim, sent twice (an attempt given up and sent again to
      // another member): the rank's key holds its record, as the backend
      // checks.
      etcd::MemberRecord holder;
      const auto& held =
          r.responses.empty() ? std::vector<etcd::KeyValue>{} : r.responses.front().range.kvs;
      if (held.empty() || !etcd::decode(held.front().value, &holder) ||
          holder.nonce != "sim-" + std::to_string(rank))
        return s.fail("rank " + std::to_string(rank) + ": claim refused");
      claimed = held.front().mod_revision;
    }
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (++s.claimed == s.simulated()) s.all_claimed = Clock::now();
    }
    std::vector<etcd::WatchSpec> specs(2);
    specs[0].key = s.keys.news(g);
    specs[0].range_end = etcd::prefix_end(specs[0].key);
    specs[0].start_revision = claimed + 1;
    specs[0].no_delete = true;
    specs[1].key = s.keys.member(g, (rank + 1) % s.world);
    specs[1].start_revision = claimed + 1;
    specs[1].no_put = true;
    specs[1].prev_kv = true;
    agent.subscribe(std::move(specs),
                    [&s, rank](std::vector<etcd::WatchEvent> evs) { s.on_events(rank, evs); });
  });
}

// Runs `work(i)` for i < n on `threads` threads.
void parallel(int n, int threads, const std::function<void(int)>& work) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < n;) work(i);
    });
  for (auto& t : pool) t.join();
}

// 127.0.0.2 + node: each node's agent connects from a loopback address of
// its own.
std::string loopback_of(int node) {
  const uint32_t a = 0x7f000002u + static_cast<uint32_t>(node);
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
}

// A worker process: the agents of its nodes and their simulated ranks, each
// phase on the parent's command ("start", "join", "death RANK", "hang NODE",
// "counts"), until the parent closes the pipe.
class Worker {
 public:
  Worker(Sim& s, etcd::BackendOptions bo, bool own_addresses)
      : s_(s), bo_(std::move(bo)), own_addresses_(own_addresses) {}

  int run(cc::test::WorkerChannel& ch) {
    std::string line;
    while (ch.next(&line)) {
      std::istringstream words(line);
      std::string verb;
      int arg = -1;
      words >> verb >> arg;
      std::string answer;
      if (verb == "start")
        answer = start();
      else if (verb == "join")
        answer = join();
      else if (verb == "death")
        answer = death(arg);
      else if (verb == "hang")
        answer = hang(arg);
      else if (verb == "shrink")
        answer = shrink();
      else if (verb == "counts")
        answer = counts();
      else
        answer = "fail unknown command '" + line + "'";
      ch.answer(answer);
    }
    stop_ = true;
    if (announcer_.joinable()) announcer_.join();
    parallel(static_cast<int>(s_.agents.size()), 64,
             [&](int i) { s_.agents[static_cast<size_t>(i)].reset(); });
    return s_.failures == 0 ? 0 : 1;
  }

 private:
  const milliseconds limit_{300000};

  std::string failed(const char* what) {
    std::lock_guard<std::mutex> lock(s_.mu);
    return std::string("fail ") + (s_.failures > 0 ? s_.first_error : what);
  }

  // The agents: one node lease each; and the announcer.
  std::string start() {
    s_.agents.resize(static_cast<size_t>(s_.end_node - s_.first_node));
    parallel(s_.end_node - s_.first_node, 64, [&](int i) {
      const int n = s_.first_node + i;
      node::AgentOptions o;
      o.backend = bo_;
      if (own_addresses_) o.backend.local_address = loopback_of(n);
      o.host = s_.host(n);
      o.pid = static_cast<uint32_t>(1000 + n);
      if (cc::Status st = node::Agent::start(o, &s_.agents[static_cast<size_t>(i)]); !st.ok())
        s_.fail("node " + std::to_string(n) + ": " + st.message);
    });
    if (s_.failures > 0) return failed("");
    etcd::ClientOptions co;
    (void)etcd::parse_address(s_.address, &co.address);
    if (cc::Status st = etcd::Client::create(co, &direct_); !st.ok())
      return "fail the announcer's client: " + st.message;
    announcer_ = std::thread([this] { announce(); });
    return "ok";
  }

  // What a simulated rank's backend does when its neighbour's key went with
  // its node's lease (Backend::Impl::neighbour_gone).
  void announce() {
    while (!stop_) {
      std::pair<int, etcd::MemberRecord> next;
      {
        std::unique_lock<std::mutex> lock(s_.mu);
        s_.cv.wait_for(lock, milliseconds(50), [&] { return !s_.to_announce.empty(); });
        if (s_.to_announce.empty()) continue;
        next = std::move(s_.to_announce.front());
        s_.to_announce.pop_front();
      }
      const etcd::Gen g(1);
      etcd::Departure d{
          cc::rv::PeerEventKind::failed, next.first, next.second.info.host, next.second.info.pid,
          "its node agent (" + next.second.node + ") was lost: the node's etcd lease expired"};
      etcd::Txn t;
      t.compare = {etcd::Compare::absent(s_.keys.gone(g, d.rank))};
      t.success = {etcd::Op::put(s_.keys.gone(g, d.rank), "failed"),
                   etcd::Op::put(s_.keys.events(g), etcd::encode(d))};
      etcd::TxnResult r;
      (void)direct_->txn(t, Clock::now() + milliseconds(30000), &r);
    }
  }

  // Every simulated rank's claim; answers when each has the result, with the
  // moment (steady clock, shared by the processes) its last claim was taken.
  std::string join() {
    const int first_rank = std::max(1, s_.first_node * s_.per_node);
    for (int r = first_rank; r < s_.end_node * s_.per_node; ++r) claim(s_, r);
    const int want = s_.simulated();
    if (!s_.wait([&] { return s_.joined == want && s_.claimed == want; }, limit_))
      return failed("the join did not end in time");
    // Each simulated rank tells its agent it is a member (as after its join).
    for (int r = first_rank; r < s_.end_node * s_.per_node; ++r) {
      const etcd::Gen g(1);
      node::Membership m{s_.keys.generation(g),  s_.keys.gone(g, r),
                         s_.keys.events(g),      r,
                         s_.host(s_.node_of(r)), static_cast<uint32_t>(100000 + r)};
      s_.agent(s_.node_of(r)).member(static_cast<node::RankId>(r), m);
    }
    std::lock_guard<std::mutex> lock(s_.mu);
    return "ok " + std::to_string(s_.all_claimed.time_since_epoch().count());
  }

  // One rank's death, reported by its agent, told to this share's ranks.
  std::string death(int victim) {
    {
      std::lock_guard<std::mutex> lock(s_.mu);
      s_.victim = victim;
    }
    const bool here = s_.mine(s_.node_of(victim));
    if (here)
      s_.agent(s_.node_of(victim))
          .rank_gone(static_cast<node::RankId>(victim), "exited with signal 9 (killed)");
    const int want = s_.simulated() - (here ? 1 : 0);
    return s_.wait([&] { return s_.told_victim >= want; }, limit_) ? "ok"
                                                                   : failed("not told in time");
  }

  // A node that hangs (its agent stops keeping its lease alive), heard of by
  // this share's ranks outside it (its ranks' keys went; the one after each
  // in the ring announces it).
  std::string hang(int lost) {
    {
      std::lock_guard<std::mutex> lock(s_.mu);
      s_.lost_node = lost;
    }
    const bool here = s_.mine(lost);
    if (here) s_.agent(lost).freeze();
    const int want =
        s_.simulated() - (here ? s_.per_node : 0) - (s_.mine(s_.node_of(s_.victim)) ? 1 : 0);
    if (!s_.wait([&] { return s_.told_node >= want; }, limit_)) return failed("not told in time");
    return "ok " + std::to_string(here ? s_.agent(lost).lease_ttl() : 0);
  }

  // Every survivor of this share calls cc_comm_shrink, as a rank behind an
  // agent does on etcd (backend_recover.cpp): its request through its agent
  // (batched with its node's), then the next generation's result from the
  // agent's stream. The real rank 0 in the parent coordinates (the simulated
  // ranks leave the coordinator key to it: each real survivor would also
  // try it once, one transaction of its own). Answers when each has the
  // result.
  std::string shrink() {
    const etcd::Gen next{1, 1};
    int want = 0;
    for (int r = std::max(1, s_.first_node * s_.per_node); r < s_.end_node * s_.per_node; ++r) {
      if (r == s_.victim || s_.node_of(r) == s_.lost_node) continue;
      ++want;
      node::Agent& agent = s_.agent(s_.node_of(r));
      etcd::MemberRecord ask = record_of(s_, r, agent.node_words());
      ask.nonce = "shrink-" + std::to_string(r);
      ask.recovering = true;
      ask.kind = cc::rv::RecoverKind::shrink;
      ask.can_shrink = true;
      etcd::Txn t;
      t.compare = {etcd::Compare::absent(s_.keys.member(next, r)),
                   etcd::Compare::absent(s_.keys.result(next))};
      t.success = {etcd::Op::put(s_.keys.member(next, r), etcd::encode(ask), agent.lease())};
      t.failure = {etcd::Op::get(s_.keys.member(next, r))};
      agent.own(static_cast<node::RankId>(r), s_.keys.member(next, r));
      agent.claim(etcd::wire::txn_json(t), [this, &agent, r, next](const cc::Status& st,
                                                                   const std::string& text) {
        if (!st.ok()) return s_.fail("rank " + std::to_string(r) + "'s shrink: " + st.message);
        int64_t revision = 0;
        try {
          const etcd::TxnResult res = etcd::wire::parse_txn(nlohmann::json::parse(text));
          revision = res.revision;
          if (!res.succeeded) {
            // Its own request, sent twice (an attempt given up and sent
            // again to another member), as the backend checks: the key
            // holds its record.
            etcd::MemberRecord held;
            const auto& kvs = res.responses.empty() ? std::vector<etcd::KeyValue>{}
                                                    : res.responses.front().range.kvs;
            if (kvs.empty() || !etcd::decode(kvs.front().value, &held) ||
                held.nonce != "shrink-" + std::to_string(r))
              return s_.fail("rank " + std::to_string(r) + "'s shrink request refused");
            revision = kvs.front().mod_revision;
          }
        } catch (const std::exception& e) {
          return s_.fail(e.what());
        }
        std::vector<etcd::WatchSpec> specs(1);
        specs[0].key = s_.keys.result(next);
        specs[0].start_revision = revision + 1;
        specs[0].no_delete = true;
        auto counted = std::make_shared<bool>(false);
        agent.subscribe(std::move(specs), [this, counted](std::vector<etcd::WatchEvent> evs) {
          std::lock_guard<std::mutex> lock(s_.mu);
          if (evs.empty() || *counted) return;
          *counted = true;
          ++s_.shrunk;
          s_.cv.notify_all();
        });
      });
    }
    if (!s_.wait([&] { return s_.shrunk >= want; }, limit_))
      return failed("the shrink's result did not reach every survivor in time");
    return "ok";
  }

  std::string counts() {
    node::Agent::Counts total;
    for (const auto& a : s_.agents) {
      const auto c = a->counts();
      total.transactions += c.transactions;
      total.claims += c.claims;
      total.streams += c.streams;
    }
    return "ok " + std::to_string(total.claims) + " " + std::to_string(total.transactions) + " " +
           std::to_string(total.streams);
  }

  Sim& s_;
  etcd::BackendOptions bo_;
  bool own_addresses_;
  std::unique_ptr<etcd::Client> direct_;
  std::atomic<bool> stop_{false};
  std::thread announcer_;
};

struct Phase {
  const char* name;
  Clock::time_point start;
  double etcd0, tool0;
};

}  // namespace

int main(int argc, char** argv) {
  cc::test::BenchArgs args;
  int per_node = 8, window_ms = 5000, per_process = 2048, idle_ms = 0, attempt_ms = 2000;
  bool one_address = false;
  cc::cli::CommandLine command_line(
      "usage: cc-etcd-agents-bench [-n NODES] [--ranks-per-node R] [--heartbeat-window MS] "
      "[--nodes-per-process K] [--from-one-address] [--members M | --address etcd://...]",
      15);
  CLI::App& app = command_line.app();
  app.description(kAbout);
  cc::test::add_bench_options(app, &args, 100000, "nodes (default 1024)");
  cc::cli::add_number(app, "--ranks-per-node", "R", 1, 64, &per_node, "ranks a node (default 8)");
  cc::cli::add_number(app, "--heartbeat-window", "MS", 2000, 600000, &window_ms,
                      "the node lease's TTL (default 5000)");
  cc::cli::add_number(app, "--nodes-per-process", "K", 1, 100000, &per_process,
                      "agents in one worker process at most (default 2048)");
  cc::cli::add_number(app, "--idle", "MS", 0, 600000, &idle_ms,
                      "after the agents start, this long with nothing but their keepalives, to "
                      "measure etcd's CPU for them (default 0: none)");
  cc::cli::add_number(app, "--attempt-timeout", "MS", 100, 600000, &attempt_ms,
                      "the agents' wait for one member's answer before the next is tried "
                      "(default 2000, the client's)");
  app.add_flag("--from-one-address", one_address,
               "every agent connects from the kernel's choice of address (127.0.0.1), not one of "
               "its own");
  if (const auto exit_status =
          cc::test::parse_bench_arguments(command_line, argc, argv, "cc-etcd-agents-bench"))
    return *exit_status;
  // Every agent holds its own connections; the etcd members started here and
  // the workers inherit the raised limit.
  cc::test::raise_open_files();

  Sim s;
  s.nodes = args.n;
  s.per_node = per_node;
  s.world = s.nodes * per_node;
  s.window = milliseconds(window_ms);
  s.saw_result.assign(static_cast<size_t>(s.world), 0);
  std::unique_ptr<cc::test::EtcdCluster> cluster;
  std::vector<pid_t> etcd_pids;
  s.address = args.address;
  if (s.address.empty()) {
    if (!cc::test::start_bench_cluster("cc-etcd-agents-bench", args.members, &s.address, &cluster,
                                         &args))
      return 1;
    for (int m = 0; m < args.members; ++m) etcd_pids.push_back(cluster->pid(m));
  }
  s.job = "agents-" + std::to_string(::getpid());
  s.keys = etcd::Keys("bench", s.job);
  const int processes = (s.nodes + per_process - 1) / per_process;
  std::printf(
      "etcd through node agents: %d nodes x %d ranks = %d ranks against %s "
      "(%d worker process%s, agents from %s)\n",
      s.nodes, per_node, s.world, s.address.c_str(), processes, processes == 1 ? "" : "es",
      one_address ? "one address" : "an address each");
  std::fflush(stdout);

  etcd::BackendOptions bo;
  bo.address = s.address;
  bo.job_id = s.job;
  bo.prefix = "bench";
  bo.connect_timeout = bo.request_timeout = milliseconds(120000);
  bo.heartbeat_window = s.window;
  bo.attempt_timeout = milliseconds(attempt_ms);

  // The workers, forked before this process starts a thread.
  std::vector<cc::test::Worker> workers;
  std::string why;
  if (!cc::test::fork_workers(
          processes,
          [&](int i, cc::test::WorkerChannel& ch) {
            s.first_node = static_cast<int>(static_cast<long long>(s.nodes) * i / processes);
            s.end_node = static_cast<int>(static_cast<long long>(s.nodes) * (i + 1) / processes);
            return Worker(s, bo, !one_address).run(ch);
          },
          &workers, &why)) {
    std::printf("failed: %s\n", why.c_str());
    return 1;
  }

  auto etcd_cpu = [&] {
    double t = 0;
    for (pid_t p : etcd_pids) t += cpu_seconds(p);
    return t;
  };
  auto tool_cpu = [&] {
    double t = cpu_seconds(::getpid());
    for (const auto& w : workers) t += cpu_seconds(w.pid);
    return t;
  };
  Phase phase{};
  auto begin = [&](const char* name) { phase = {name, Clock::now(), etcd_cpu(), tool_cpu()}; };
  auto end = [&](bool ok) {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - phase.start).count();
    std::printf("%-34s %s %9.0f ms   (CPU: etcd %.2f s, this tool's processes %.2f s)\n",
                phase.name, ok ? "  " : "!!", ms, etcd_cpu() - phase.etcd0,
                tool_cpu() - phase.tool0);
    std::fflush(stdout);
    return ms;
  };
  const milliseconds limit(300000);
  std::vector<std::string> answers;
  auto all = [&](const std::string& command) {
    return cc::test::ask_workers(
        workers, [&](size_t) { return command; }, &answers, &why);
  };
  auto stop = [&](bool ok) {
    if (!ok) std::printf("failed: %s\n", why.c_str());
    const bool ended = cc::test::end_workers(&workers);
    return ok && ended ? 0 : 1;
  };

  begin("agents started (a lease each)");
  const bool started = all("start");
  end(started);
  if (!started) return stop(false);

  // The cost of the keepalives alone (one a node every third of the TTL),
  // which goes on through every later phase.
  if (idle_ms > 0) {
    begin("idle (the agents' keepalives only)");
    std::this_thread::sleep_for(milliseconds(idle_ms));
    const double cpu = etcd_cpu() - phase.etcd0;
    end(true);
    const double keepalives = s.nodes * (idle_ms / 1000.0) / (window_ms / 3000.0);
    std::printf("  (about %.0f keepalives a second: etcd %.2f ms of CPU each, %.2f cores)\n",
                keepalives * 1000.0 / idle_ms, cpu * 1000.0 / keepalives, cpu * 1000.0 / idle_ms);
  }

  // The join: rank 0 real, the others through their agents.
  begin("join");
  std::unique_ptr<etcd::Backend> rank0;
  cc::Status rank0_status;
  std::thread r0([&] {
    etcd::BackendOptions o = bo;
    o.member = true;
    if (rank0_status = etcd::Backend::connect(o, &rank0); !rank0_status.ok()) return;
    cc::rv::Join j;
    j.info = record_of(s, 0, "").info;
    j.unique_id.assign(128, 0x5a);
    j.timeout_ms = static_cast<uint32_t>(limit.count());
    cc::rv::Joined joined;
    rank0_status = rank0->join(j, &joined);
  });
  const bool joined = all("join");
  r0.join();
  const Clock::time_point join_start = phase.start;
  end(joined && rank0_status.ok());
  if (!joined || !rank0_status.ok()) {
    if (joined) why = "rank 0: " + rank0_status.message;
    return stop(false);
  }
  Clock::rep last_claim = 0;
  for (const auto& a : answers)
    last_claim = std::max<Clock::rep>(last_claim, std::stoll(a.substr(3)));
  std::printf("  (every claim taken by %.0f ms)\n",
              std::chrono::duration<double, std::milli>(
                  Clock::time_point(Clock::duration(last_claim)) - join_start)
                  .count());

  // One rank's death, reported by its agent.
  const int victim_node = s.nodes > 2 ? s.nodes / 2 : s.nodes - 1;
  const int victim = victim_node * per_node + per_node / 2;
  begin("one rank's death told to all");
  const bool told = all("death " + std::to_string(victim));
  end(told);
  if (!told) return stop(false);

  // A node that hangs: its agent stops keeping its lease alive.
  int lost = s.nodes > 4 ? s.nodes / 4 : -1;
  if (lost > 0 && lost != victim_node) {
    begin("a hung node told to all");
    const bool heard = all("hang " + std::to_string(lost));
    end(heard);
    if (!heard) return stop(false);
    long long ttl = 0;
    for (const auto& a : answers) ttl = std::max(ttl, std::stoll(a.substr(3)));
    std::printf("  (the node lease's TTL is %lld s)\n", ttl);
  }

  // A shrink after both: the real rank 0 on a connection of its own
  // coordinates; every simulated survivor asks through its agent.
  {
    begin("shrink, to the decision told to all");
    std::unique_ptr<etcd::Backend> recovery;
    cc::Status recovered;
    cc::rv::Joined next;
    std::thread r0_shrink([&] {
      etcd::BackendOptions o = bo;
      o.member = true;
      if (recovered = etcd::Backend::connect(o, &recovery); !recovered.ok()) return;
      cc::rv::Recover req;
      req.info = record_of(s, 0, "").info;
      req.kind = cc::rv::RecoverKind::shrink;
      req.can_shrink = true;
      req.timeout_ms = static_cast<uint32_t>(limit.count());
      recovered = recovery->recover(
          req,
          [](std::vector<uint8_t>* id) {
            id->assign(128, 0x6b);
            return cc::Status::success();
          },
          &next);
    });
    const bool shrunk = all("shrink");
    r0_shrink.join();
    end(shrunk && recovered.ok());
    if (!shrunk || !recovered.ok()) {
      if (shrunk) why = "rank 0's shrink: " + recovered.message;
      return stop(false);
    }
    std::printf("  (generation %u: %u ranks, %zu left out)\n", next.generation, next.world_size,
                next.failed.size());
  }

  if (!all("counts")) return stop(false);
  unsigned long long claims = 0, transactions = 0, streams = 0;
  for (const auto& a : answers) {
    std::istringstream in(a.substr(3));
    unsigned long long c = 0, t = 0, st = 0;
    in >> c >> t >> st;
    claims += c;
    transactions += t;
    streams += st;
  }
  std::printf("agents: %llu claims in %llu transactions, %llu watch streams opened\n", claims,
              transactions, streams);
  std::fflush(stdout);
  rank0.reset();
  return stop(true);
}
