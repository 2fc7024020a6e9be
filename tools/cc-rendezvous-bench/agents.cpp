#include "tools/cc-rendezvous-bench/agents.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <thread>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include "rendezvous/agent/agent_loop.hpp"
#include "rendezvous/factory/elected.hpp"
#include "rendezvous/protocol.hpp"
#include "tools/cc-rendezvous-bench/child_server.hpp"

namespace cc::tools::rendezvous_bench {
namespace {

namespace rv = cc::rv;
namespace ag = cc::rv::agent;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kStall = std::chrono::seconds(60);
constexpr uint32_t kComm = 1;
constexpr const char* kKilled = "exited with signal 9 (killed)";

enum class AgentsPhase { join, heartbeats, death, node_death, shrink, leave, done, failed };

const char* phase_name(AgentsPhase p) {
  switch (p) {
    case AgentsPhase::join: return "join";
    case AgentsPhase::heartbeats: return "first heartbeats";
    case AgentsPhase::death: return "one rank's death told to all";
    case AgentsPhase::node_death: return "a hung node told to all";
    case AgentsPhase::shrink: return "shrink";
    case AgentsPhase::leave: return "leave";
    default: return "";
  }
}

struct SimRank {
  int32_t rank = 0;
  int node = 0;
  ag::LocalId comm = 0;      // its communicator's connection to its agent
  ag::LocalId recovery = 0;  // its shrink's connection
  std::vector<uint8_t> seat;  // from its Joined: proves it in its shrink
  bool gone = false;         // the rank that dies, and those of the node that hangs
  bool told_death = false, told_node = false;
};

class Sim;

// One node: the real agent, and its ranks' connections to it in memory.
class SimNode final : public ag::RankSide {
 public:
  SimNode(Sim& sim, asio::io_context& io, ag::AgentOptions o, ag::UpstreamTarget t)
      : sim_(sim), loop_(io, std::move(o), *this, std::move(t)) {}

  ag::AgentLoop& loop() { return loop_; }

  ag::LocalId connect(int rank_index) {
    const ag::LocalId id = next_++;
    owner_[id] = rank_index;
    loop_.core().rank_connected(id, 10000 + rank_index, 10000 + rank_index, Clock::now());
    return id;
  }

  void send(ag::LocalId conn, uint32_t rid, const rv::Message& m) {
    const std::vector<uint8_t> bytes = rv::encode_frame(rid, m);
    loop_.core().rank_bytes(conn, bytes, Clock::now());
    loop_.after_input();
  }

  void to_rank(ag::LocalId conn, std::span<const uint8_t> bytes) override;
  void close_rank(ag::LocalId conn) override { owner_.erase(conn); }

  bool ready = false;  // its agent answered a rank's hello

 private:
  Sim& sim_;
  ag::AgentLoop loop_;
  std::unordered_map<ag::LocalId, int> owner_;
  ag::LocalId next_ = 1;
};

double cpu_seconds(pid_t pid);  // user + system, from /proc

class Sim {
 public:
  Sim(const AgentsRun& run, int port, pid_t server)
      : run_(run), port_(port), server_(server), stall_(io_), poll_(io_) {
    world_ = run.nodes * run.ranks_per_node;
    ranks_.resize(static_cast<size_t>(world_));
    for (int i = 0; i < world_; ++i) {
      ranks_[static_cast<size_t>(i)].rank = i;
      ranks_[static_cast<size_t>(i)].node = i / run.ranks_per_node;
    }
    victim_ = (run.nodes / 2) * run.ranks_per_node + std::min(3, run.ranks_per_node - 1);
    hung_ = run.nodes / 4 == run.nodes / 2 ? 0 : run.nodes / 4;
  }

  bool run() {
    server_cpu_at_start_ = cpu_seconds(server_);
    phase_start_ = Clock::now();
    last_progress_ = phase_start_;
    for (int i = 0; i < run_.window && next_node_ < run_.nodes; ++i) start_node();
    arm_stall();
    io_.run();
    for (auto& n : nodes_) n->loop().stop();
    return phase_ == AgentsPhase::done;
  }

  void on_frame(int index, ag::LocalId conn, uint32_t rid, const rv::Message& m) {
    last_progress_ = Clock::now();
    SimRank& r = ranks_[static_cast<size_t>(index)];
    SimNode& node = *nodes_[static_cast<size_t>(r.node)];
    if (const auto* e = std::get_if<rv::Error>(&m))
      return fail("rank " + std::to_string(index) + ": " + e->message);
    if (std::holds_alternative<rv::Challenge>(m)) {
      if (!node.ready) {
        node.ready = true;
        if (next_node_ < run_.nodes) start_node();
      }
      if (conn == r.comm) return node.send(conn, 2, join_of(r));
      return node.send(conn, 2, recover_of(r));
    }
    if (const auto* j = std::get_if<rv::Joined>(&m)) {
      if (conn == r.comm) {
        r.seat = j->seat;
        if (++count_ == world_) next_phase();
        return;
      }
      if (rv::world_size_of(*j) != static_cast<size_t>(alive_))
        return fail("rank " + std::to_string(index) + ": the shrink kept " +
                    std::to_string(rv::world_size_of(*j)) + " ranks, not the " +
                    std::to_string(alive_) + " alive");
      if (++count_ == alive_) next_phase();
      return;
    }
    if (const auto* w = std::get_if<rv::RecoverIdWanted>(&m)) {
      rv::RecoverId id;
      id.generation = w->generation;
      id.unique_id.assign(128, 0x6b);
      id.timeout_ms = 600000;
      return node.send(conn, 3, id);
    }
    if (const auto* p = std::get_if<rv::Progress>(&m)) return on_progress(*p);
    if (const auto* ev = std::get_if<rv::PeerEvent>(&m)) return on_event(r, *ev);
    if (std::holds_alternative<rv::Ok>(m) && rid == 9 && phase_ == AgentsPhase::leave) {
      if (++count_ == 2 * alive_) next_phase();
    }
  }

 private:
  void start_node() {
    const int k = next_node_++;
    ag::AgentOptions o;
    o.job_id = job_;
    o.host = "node-" + std::to_string(k);
    o.pid = static_cast<uint32_t>(100000 + k);
    o.upstream = "127.0.0.1:" + std::to_string(port_);
    o.heartbeat_window = run_.heartbeat_window;
    ag::UpstreamTarget t;
    t.endpoints = {asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                           static_cast<unsigned short>(port_))};
    t.where = o.upstream;
    t.deadline = Clock::now() + std::chrono::seconds(120);
    t.read_size = 4096;
    // From 127.0.0.2 on, one loopback address a node, as nodes on different
    // hosts have: from one address, the kernel's search for a free port of
    // each of 16,384 connections would be the largest cost of the run.
    t.source = asio::ip::address_v4(0x7f000002u + static_cast<uint32_t>(k));
    nodes_.push_back(std::make_unique<SimNode>(*this, io_, std::move(o), std::move(t)));
    SimNode& node = *nodes_.back();
    node.loop().start();
    for (int i = 0; i < run_.ranks_per_node; ++i) {
      SimRank& r = ranks_[static_cast<size_t>(k * run_.ranks_per_node + i)];
      r.comm = node.connect(r.rank);
      node.send(r.comm, 1, hello_of(r));
    }
  }

  rv::Hello hello_of(const SimRank& r) const {
    return rv::Hello{job_, "node-" + std::to_string(r.node), static_cast<uint32_t>(10000 + r.rank),
                     "cc-rendezvous-bench agents"};
  }

  rv::MemberInfo info_of(const SimRank& r) const {
    rv::MemberInfo i;
    i.rank = r.rank;
    i.world_size = world_;
    i.comm_number = kComm;
    i.host = "node-" + std::to_string(r.node);
    i.pid = static_cast<uint32_t>(10000 + r.rank);
    i.nccl_version = 22809;
    i.gpu_uuid = "GPU-" + std::to_string(r.rank % run_.ranks_per_node);
    i.host_key = i.host;
    i.nccl_addr = "10." + std::to_string(r.node / 65536) + "." +
                  std::to_string(r.node / 256 % 256) + "." + std::to_string(r.node % 256);
    return i;
  }

  rv::Join join_of(const SimRank& r) const {
    rv::Join j;
    j.info = info_of(r);
    if (r.rank == 0) j.unique_id.assign(128, 0x5a);
    j.timeout_ms = 600000;
    return j;
  }

  rv::Recover recover_of(const SimRank& r) const {
    rv::Recover q;
    q.info = info_of(r);
    q.generation = 0;
    q.kind = rv::RecoverKind::shrink;
    q.can_shrink = true;
    q.timeout_ms = 600000;
    q.seat = r.seat;
    return q;
  }

  SimNode& node_of(const SimRank& r) { return *nodes_[static_cast<size_t>(r.node)]; }

  void next_phase() {
    const auto now = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - phase_start_).count();
    // The server's CPU in this phase: what it would need on a machine of
    // its own, where the simulated nodes do not share its cores.
    const double server_cpu = cpu_seconds(server_);
    std::printf("  %-30s %9.1f ms   server CPU %7.0f ms\n", phase_name(phase_), ms,
                (server_cpu - server_cpu_at_start_) * 1000.0);
    std::fflush(stdout);
    server_cpu_at_start_ = server_cpu;
    count_ = 0;
    phase_start_ = now;
    switch (phase_) {
      case AgentsPhase::join: return start_heartbeats();
      case AgentsPhase::heartbeats: return start_death();
      case AgentsPhase::death: return start_node_death();
      case AgentsPhase::node_death: return start_shrink();
      case AgentsPhase::shrink: return start_leave();
      case AgentsPhase::leave:
        phase_ = AgentsPhase::done;
        return io_.stop();
      default: return;
    }
  }

  void start_heartbeats() {
    phase_ = AgentsPhase::heartbeats;
    for (SimRank& r : ranks_) {
      node_of(r).send(r.comm, 4, rv::HeartbeatWindow{static_cast<uint32_t>(
                                     run_.heartbeat_window.count())});
      node_of(r).send(r.comm, 5, rv::Heartbeat{1, kComm, 0});
    }
    ask_progress();
  }

  // Rank 0 asks who is furthest behind until every rank's heartbeat is in.
  void ask_progress() {
    SimRank& r = ranks_[0];
    node_of(r).send(r.comm, 6, rv::ProgressQuery{kComm, -1, 0, false});
  }

  void on_progress(const rv::Progress& p) {
    if (phase_ != AgentsPhase::heartbeats) return;
    bool all = !p.members.empty();
    for (const auto& m : p.members) all = all && m.last_completed >= 1;
    if (all) return next_phase();
    poll_.expires_after(milliseconds(20));
    poll_.async_wait([this](std::error_code ec) {
      if (!ec) ask_progress();
    });
  }

  void start_death() {
    phase_ = AgentsPhase::death;
    SimRank& v = ranks_[static_cast<size_t>(victim_)];
    v.gone = true;
    alive_ = world_ - 1;
    node_of(v).loop().core().process_exited(10000 + v.rank, kKilled, Clock::now());
    node_of(v).loop().after_input();
  }

  void start_node_death() {
    phase_ = AgentsPhase::node_death;
    for (int i = 0; i < run_.ranks_per_node; ++i)
      ranks_[static_cast<size_t>(hung_ * run_.ranks_per_node + i)].gone = true;
    alive_ = world_ - 1 - run_.ranks_per_node;
    nodes_[static_cast<size_t>(hung_)]->loop().freeze();
  }

  void on_event(SimRank& r, const rv::PeerEvent& ev) {
    if (ev.kind != rv::PeerEventKind::failed || r.gone) return;
    if (ev.rank == victim_ && !r.told_death) {
      if (ev.reason != kKilled)
        return fail("rank " + std::to_string(r.rank) + " was told '" + ev.reason + "', not '" +
                    kKilled + "'");
      r.told_death = true;
      if (phase_ == AgentsPhase::death && ++count_ == alive_) next_phase();
      return;
    }
    if (ev.rank == hung_ * run_.ranks_per_node && !r.told_node) {
      if (ev.with.size() != static_cast<size_t>(run_.ranks_per_node - 1))
        return fail("the hung node's event names " + std::to_string(ev.with.size() + 1) +
                    " ranks, not " + std::to_string(run_.ranks_per_node));
      r.told_node = true;
      if (phase_ == AgentsPhase::node_death && ++count_ == alive_) next_phase();
    }
  }

  void start_shrink() {
    phase_ = AgentsPhase::shrink;
    for (SimRank& r : ranks_) {
      if (r.gone) continue;
      r.recovery = node_of(r).connect(r.rank);
      node_of(r).send(r.recovery, 1, hello_of(r));
    }
  }

  void start_leave() {
    phase_ = AgentsPhase::leave;
    for (SimRank& r : ranks_) {
      if (r.gone) continue;
      node_of(r).send(r.recovery, 9, rv::Leave{});
      node_of(r).send(r.comm, 9, rv::Leave{});
    }
  }

  void fail(const std::string& why) {
    if (phase_ == AgentsPhase::failed) return;
    std::printf("  %s FAILED: %s\n", phase_name(phase_), why.c_str());
    phase_ = AgentsPhase::failed;
    io_.stop();
  }

  void arm_stall() {
    stall_.expires_after(std::chrono::seconds(1));
    stall_.async_wait([this](std::error_code ec) {
      if (ec) return;
      if (Clock::now() - last_progress_ > kStall)
        return fail("nothing for " + std::to_string(kStall.count()) + " s (" +
                    std::to_string(count_) + " ranks done)");
      arm_stall();
    });
  }

  const AgentsRun& run_;
  int port_;
  pid_t server_;
  asio::io_context io_;
  std::string job_ = "agents-" + std::to_string(::getpid());
  int world_ = 0;
  int alive_ = 0;
  int victim_ = 0;
  int hung_ = 0;
  std::vector<SimRank> ranks_;
  std::vector<std::unique_ptr<SimNode>> nodes_;
  int next_node_ = 0;
  AgentsPhase phase_ = AgentsPhase::join;
  int count_ = 0;
  Clock::time_point phase_start_, last_progress_;
  double server_cpu_at_start_ = 0;
  asio::steady_timer stall_, poll_;

  friend class SimNode;
};

void SimNode::to_rank(ag::LocalId conn, std::span<const uint8_t> bytes) {
  auto it = owner_.find(conn);
  if (it == owner_.end()) return;
  const int index = it->second;
  size_t at = 0;
  while (bytes.size() - at >= rv::kHeaderSize) {
    rv::FrameHeader h;
    if (rv::parse_header(bytes.subspan(at, rv::kHeaderSize), rv::Limits{}, &h) !=
            rv::DecodeError::none ||
        bytes.size() - at < rv::kHeaderSize + h.length)
      return sim_.on_frame(index, conn, 0, rv::Error{0, "a frame the bench cannot read"});
    rv::Message m;
    if (rv::decode_message(h.type, bytes.subspan(at + rv::kHeaderSize, h.length), rv::Limits{},
                           &m) != rv::DecodeError::none)
      return sim_.on_frame(index, conn, 0, rv::Error{0, "a message the bench cannot decode"});
    at += rv::kHeaderSize + h.length;
    sim_.on_frame(index, conn, h.request_id, m);
  }
}

long long peak_rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6);
  return -1;
}

double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields;
  std::string field;
  for (size_t i = close + 2; i < text.size(); ++i) {
    if (text[i] == ' ') {
      fields.push_back(field);
      field.clear();
    } else {
      field += text[i];
    }
  }
  if (fields.size() < 13) return -1;
  return static_cast<double>(std::atoll(fields[11].c_str()) + std::atoll(fields[12].c_str())) /
         static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The elected server: a cc-rendezvous --etcd daemon on 127.0.0.1:port
// under a prefix of this run's own, and the election the nodes ask.
struct Elected {
  ChildServer server;
  std::unique_ptr<rv::Election> election;
};

std::string own_folder() {
  char path[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  std::string p(path, n > 0 ? static_cast<size_t>(n) : 0);
  return p.substr(0, p.rfind('/'));
}

bool start_elected(const std::string& etcd, Elected* out) {
  const std::string prefix = "agents-bench-" + std::to_string(::getpid());
  ::setenv("CC_ETCD_PREFIX", prefix.c_str(), 1);
  rv::factory::Address address;
  rv::factory::Options fo;
  fo.job_id.clear();
  fo.connect_timeout = std::chrono::seconds(20);
  if (cc::Status s = rv::factory::parse_address(etcd, &address); !s.ok() || address.server()) {
    std::printf("agents: --etcd %s is not an etcd address\n", etcd.c_str());
    return false;
  }
  if (cc::Status s = rv::factory::open_election(address, fo, &out->election); !s.ok()) {
    std::printf("agents: FAILED: %s\n", s.message.c_str());
    return false;
  }
  // A free port for the daemon.
  {
    asio::io_context io;
    asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    out->server.port = a.local_endpoint().port();
  }
  const std::string daemon = own_folder() + "/cc-rendezvous";
  const std::string port = std::to_string(out->server.port);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(daemon.c_str(), daemon.c_str(), "--etcd", etcd.c_str(), "--bind", "127.0.0.1",
            "--port", port.c_str(), "--advertise", ("127.0.0.1:" + port).c_str(),
            "--max-connections", "10000000", "--log-level", "warn", nullptr);
    std::_Exit(127);
  }
  out->server.pid = pid;
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < until) {
    std::string leader;
    if (out->election->leader("", Clock::now() + std::chrono::seconds(5), &leader).ok() &&
        !leader.empty())
      return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  std::printf("agents: FAILED: %s did not lead within 30 s\n", daemon.c_str());
  return false;
}

// Every node asks etcd where the server is, as cc-run's agent does; 16 at once.
bool locate_all(const AgentsRun& run, rv::Election& election) {
  std::atomic<int> next{0}, failed{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      for (int i = next++; i < run.nodes; i = next++) {
        std::string leader;
        if (!election.leader("", Clock::now() + std::chrono::seconds(30), &leader).ok() ||
            leader.empty())
          ++failed;
      }
    });
  for (auto& t : threads) t.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("  locate: %d nodes asked etcd for the leader in %.2f s%s\n", run.nodes, s,
              failed > 0 ? " (some failed)" : "");
  return failed == 0;
}

}  // namespace

bool run_agents(const AgentsRun& run) {
  Elected elected;
  if (!run.etcd.empty()) {
    if (!start_elected(run.etcd, &elected)) return false;
    if (!locate_all(run, *elected.election)) return false;
  }
  const ChildServer server = run.etcd.empty() ? fork_server() : elected.server;
  if (server.pid < 0) {
    std::printf("agents: FAILED: could not start a server process\n");
    return false;
  }
  std::printf("%d nodes x %d ranks (%d ranks) through node agents; server %s on "
              "127.0.0.1:%d; heartbeat window %lld ms\n",
              run.nodes, run.ranks_per_node, run.nodes * run.ranks_per_node,
              run.etcd.empty() ? "in a child process" : "a cc-rendezvous elected in etcd",
              server.port,
              static_cast<long long>(run.heartbeat_window.count()));
  std::fflush(stdout);
  bool ok = false;
  {
    Sim sim(run, server.port, server.pid);
    ok = sim.run();
  }
  std::printf("  server: peak RSS %.1f MiB, CPU %.2f s; agents and ranks (this process): CPU "
              "%.2f s\n",
              static_cast<double>(peak_rss_kib(server.pid)) / 1024.0, cpu_seconds(server.pid),
              cpu_seconds(::getpid()));
  stop_server(server, std::chrono::seconds(30));
  std::fflush(stdout);
  return ok;
}

}  // namespace cc::tools::rendezvous_bench
