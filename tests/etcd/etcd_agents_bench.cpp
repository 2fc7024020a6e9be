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
// the agents start; the join; one rank's death told to every rank (its agent
// reports the exit); a node that hangs (its agent stops its keepalives)
// told to every rank.
//
// Without --address it starts a local etcd cluster of --members members on
// 127.0.0.1, as cc-etcd-rendezvous-bench does.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
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

struct Sim {
  int nodes = 0, per_node = 0, world = 0;
  std::string address, job;
  milliseconds window{5000};
  etcd::Keys keys{"bench", "x"};
  std::vector<std::unique_ptr<node::Agent>> agents;
  std::vector<pid_t> etcd_pids;

  std::mutex mu;
  std::condition_variable cv;
  int joined = 0;   // simulated ranks that have the result
  int claimed = 0;  // simulated ranks whose claim etcd took
  Clock::time_point all_claimed;
  int failures = 0;  // claims refused or failed
  std::string first_error;
  int victim = -1, lost_node = -1;
  int told_victim = 0, told_node = 0;  // simulated ranks told each departure
  std::deque<std::pair<int, etcd::MemberRecord>> to_announce;  // neighbour gone
  std::vector<uint8_t> saw_result;

  double etcd_cpu() const {
    double t = 0;
    for (pid_t p : etcd_pids) t += cpu_seconds(p);
    return t;
  }
  int node_of(int rank) const { return rank / per_node; }
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
  node::Agent& agent = *s.agents[static_cast<size_t>(s.node_of(rank))];
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
      if (++s.claimed == s.world - 1) s.all_claimed = Clock::now();
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

struct Phase {
  const char* name;
  Clock::time_point start;
  double etcd0, self0;
};

}  // namespace

int main(int argc, char** argv) {
  cc::test::BenchArgs args;
  int per_node = 8, window_ms = 5000;
  cc::cli::CommandLine command_line(
      "usage: cc-etcd-agents-bench [-n NODES] [--ranks-per-node R] [--heartbeat-window MS] "
      "[--members M | --address etcd://...]",
      15);
  CLI::App& app = command_line.app();
  app.description(kAbout);
  cc::test::add_bench_options(app, &args, 100000, "nodes (default 1024)");
  cc::cli::add_number(app, "--ranks-per-node", "R", 1, 64, &per_node, "ranks a node (default 8)");
  cc::cli::add_number(app, "--heartbeat-window", "MS", 2000, 600000, &window_ms,
                      "the node lease's TTL (default 5000)");
  if (const auto exit_status =
          cc::test::parse_bench_arguments(command_line, argc, argv, "cc-etcd-agents-bench"))
    return *exit_status;
  cc::test::raise_open_files();

  Sim s;
  s.nodes = args.n;
  s.per_node = per_node;
  s.world = s.nodes * per_node;
  s.window = milliseconds(window_ms);
  s.saw_result.assign(static_cast<size_t>(s.world), 0);
  std::unique_ptr<cc::test::EtcdCluster> cluster;
  s.address = args.address;
  if (s.address.empty()) {
    if (!cc::test::start_bench_cluster("cc-etcd-agents-bench", args.members, &s.address, &cluster))
      return 1;
    for (int m = 0; m < args.members; ++m) s.etcd_pids.push_back(cluster->pid(m));
  }
  s.job = "agents-" + std::to_string(::getpid());
  s.keys = etcd::Keys("bench", s.job);
  std::printf("etcd through node agents: %d nodes x %d ranks = %d ranks against %s\n", s.nodes,
              per_node, s.world, s.address.c_str());
  std::fflush(stdout);

  etcd::BackendOptions bo;
  bo.address = s.address;
  bo.job_id = s.job;
  bo.prefix = "bench";
  bo.connect_timeout = bo.request_timeout = milliseconds(120000);
  bo.heartbeat_window = s.window;

  Phase phase{};
  auto begin = [&](const char* name) {
    phase = {name, Clock::now(), s.etcd_cpu(), cpu_seconds(::getpid())};
  };
  auto end = [&](bool ok) {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - phase.start).count();
    std::printf("%-34s %s %9.0f ms   (CPU: etcd %.2f s, this process %.2f s)\n", phase.name,
                ok ? "  " : "!!", ms, s.etcd_cpu() - phase.etcd0,
                cpu_seconds(::getpid()) - phase.self0);
    std::fflush(stdout);
    return ms;
  };
  const milliseconds limit(300000);

  // The agents: one node lease each.
  begin("agents started (a lease each)");
  s.agents.resize(static_cast<size_t>(s.nodes));
  parallel(s.nodes, 64, [&](int n) {
    node::AgentOptions o;
    o.backend = bo;
    o.host = s.host(n);
    o.pid = static_cast<uint32_t>(1000 + n);
    if (cc::Status st = node::Agent::start(o, &s.agents[static_cast<size_t>(n)]); !st.ok())
      s.fail("node " + std::to_string(n) + ": " + st.message);
  });
  end(s.failures == 0);
  if (s.failures > 0) {
    std::printf("failed: %s\n", s.first_error.c_str());
    return 1;
  }

  // The announcer: what a simulated rank's backend does when its neighbour's
  // key went with its node's lease (Backend::Impl::neighbour_gone).
  std::unique_ptr<etcd::Client> direct;
  {
    etcd::ClientOptions co;
    (void)etcd::parse_address(s.address, &co.address);
    (void)etcd::Client::create(co, &direct);
  }
  std::atomic<bool> stop{false};
  std::thread announcer([&] {
    while (!stop) {
      std::pair<int, etcd::MemberRecord> next;
      {
        std::unique_lock<std::mutex> lock(s.mu);
        s.cv.wait_for(lock, milliseconds(50), [&] { return !s.to_announce.empty(); });
        if (s.to_announce.empty()) continue;
        next = std::move(s.to_announce.front());
        s.to_announce.pop_front();
      }
      const etcd::Gen g(1);
      etcd::Departure d{
          cc::rv::PeerEventKind::failed, next.first, next.second.info.host, next.second.info.pid,
          "its node agent (" + next.second.node + ") was lost: the node's etcd lease expired"};
      etcd::Txn t;
      t.compare = {etcd::Compare::absent(s.keys.gone(g, d.rank))};
      t.success = {etcd::Op::put(s.keys.gone(g, d.rank), "failed"),
                   etcd::Op::put(s.keys.events(g), etcd::encode(d))};
      etcd::TxnResult r;
      (void)direct->txn(t, Clock::now() + milliseconds(30000), &r);
    }
  });
  // Stops the announcer on every way out of main.
  struct Joined {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joined() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } announcer_stops{stop, announcer};

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
  for (int r = 1; r < s.world; ++r) claim(s, r);
  const bool joined = s.wait([&] { return s.joined == s.world - 1; }, limit);
  r0.join();
  const Clock::time_point join_start = phase.start;
  end(joined && rank0_status.ok());
  std::printf("  (every claim taken by %.0f ms)\n",
              std::chrono::duration<double, std::milli>(s.all_claimed - join_start).count());
  if (!joined || !rank0_status.ok()) {
    std::printf("failed: %s\n",
                !rank0_status.ok() ? rank0_status.message.c_str() : s.first_error.c_str());
    return 1;
  }
  // Each simulated rank tells its agent it is a member (as after its join).
  for (int r = 1; r < s.world; ++r) {
    const etcd::Gen g(1);
    node::Membership m{s.keys.generation(g), s.keys.gone(g, r),
                       s.keys.events(g),     r,
                       s.host(s.node_of(r)), static_cast<uint32_t>(100000 + r)};
    s.agents[static_cast<size_t>(s.node_of(r))]->member(static_cast<node::RankId>(r), m);
  }

  // One rank's death, reported by its agent.
  const int victim_node = s.nodes > 2 ? s.nodes / 2 : s.nodes - 1;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.victim = victim_node * per_node + per_node / 2;
  }
  begin("one rank's death told to all");
  s.agents[static_cast<size_t>(victim_node)]->rank_gone(static_cast<node::RankId>(s.victim),
                                                        "exited with signal 9 (killed)");
  const int others = s.world - 2;  // the simulated ranks but the victim
  const bool told = s.wait([&] { return s.told_victim >= others; }, limit);
  end(told);

  // A node that hangs: its agent stops keeping its lease alive.
  int lost = s.nodes > 4 ? s.nodes / 4 : -1;
  if (lost > 0 && lost != victim_node) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.lost_node = lost;
    }
    begin("a hung node told to all");
    s.agents[static_cast<size_t>(lost)]->freeze();
    // Every simulated rank outside the lost node hears of it (its ranks' keys
    // went; the one after it in the ring announces the first).
    const int want = s.world - 1 - per_node - 1;
    const bool heard = s.wait([&] { return s.told_node >= want; }, limit);
    end(heard);
    std::printf("  (the node lease's TTL is %lld s)\n",
                static_cast<long long>(s.agents[static_cast<size_t>(lost)]->lease_ttl()));
  }

  node::Agent::Counts total;
  for (const auto& a : s.agents) {
    const auto c = a->counts();
    total.transactions += c.transactions;
    total.claims += c.claims;
    total.streams += c.streams;
  }
  std::printf("agents: %llu claims in %llu transactions, %llu watch streams opened\n",
              static_cast<unsigned long long>(total.claims),
              static_cast<unsigned long long>(total.transactions),
              static_cast<unsigned long long>(total.streams));
  rank0.reset();
  parallel(s.nodes, 64, [&](int n) { s.agents[static_cast<size_t>(n)].reset(); });
  return s.failures == 0 && told ? 0 : 1;
}
