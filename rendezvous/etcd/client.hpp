// An etcd v3 client: key ranges, puts, deletes, transactions and leases,
// with a deadline on every call and failover between endpoints.
//
// It speaks etcd's JSON gateway (POST /v3/kv/range, /v3/kv/txn, /v3/lease/*,
// ...; keys and values base64 in JSON) over HTTP/1.1, with cpp-httplib for
// HTTP and TLS and nlohmann-json for JSON. Why the gateway and not gRPC:
// - gRPC needs etcd's .proto files compiled into our code, and Debian packages
//   neither those files nor generated stubs: we would vendor etcd's API and
//   gogoproto/google-api annotations, and pull libgrpc++ and protobuf (tens of
//   MiB of shared libraries) into every program that links libcc.
// - The gateway is part of etcd itself (3.4 and later serve it at /v3/), speaks
//   the same API with the same semantics (revisions, leases, txn, watch
//   streams), and needs only an HTTP client and a JSON parser, both Debian
//   packages and both well kept.
// - What it costs: JSON and base64 are larger and slower to parse than
//   protobuf, a watch is one streaming HTTP response per watch stream rather
//   than a multiplexed HTTP/2 stream, and each in-flight request holds its own
//   connection. At rendezvous sizes (a few operations per rank) the cost is
//   in etcd's Raft commits, not in the encoding (see the etcd benchmark).
//
// Failover: a request that fails on one endpoint (refused, reset, timed out,
// HTTP 5xx, "leader changed", "no leader", "request timed out") is retried on
// the next endpoint, round robin with a short backoff after each full round,
// until the caller's deadline. Errors at the deadline name etcd, every
// endpoint with its last error, and, when members answered without a leader,
// the quorum the cluster needs.
//
// Auth: with an auth file ("user:password" on its first line) the client gets
// a token from /v3/auth/authenticate, sends it in the Authorization header,
// and gets a new one when etcd says "invalid auth token" (simple tokens
// expire after 5 minutes idle). TLS (etcds://) checks the servers'
// certificates against a CA file, and can present a client certificate.
//
// Threads: every call may be made from any thread at once; each request uses
// its own pooled keep-alive connection.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "rendezvous/etcd/endpoints.hpp"

namespace httplib {
class ClientImpl;
}

namespace cc::rv::etcd {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

struct ClientOptions {
  Address address;
  std::string ca_file;    // etcds://: the CA of the servers' certificates (empty: the system's)
  std::string cert_file;  // etcds://: a client certificate (with key_file), when etcd asks for one
  std::string key_file;
  // "user:password" on the first line (the way etcdctl --user takes them);
  // empty: etcd without auth.
  std::string auth_file;
  // The longest the first attempt on one endpoint may take before the next
  // one is tried: connecting, and waiting for the answer. A member that still
  // believes in a leader that died holds a write until etcd's own timeout
  // (over 5 s), so the first wait is short; each attempt that got no answer
  // doubles it for the next, so a merely busy cluster is not flooded with
  // copies. A write sent again is recognised by its caller (see Backend).
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds attempt_timeout{2000};
  // The address this client's connections come from: an IPv4 or IPv6
  // literal of this host (empty: the kernel's choice). For simulations of
  // many hosts on one machine (each node's agent from an address of its own
  // in 127.0.0.0/8), where thousands of connections from one address to one
  // port make the kernel's search for a free port the largest cost.
  std::string local_address;
};

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct RangeResult {
  int64_t revision = 0;  // the store's revision when the range was read
  std::vector<KeyValue> kvs;
  int64_t count = 0;  // keys in the range (more than kvs.size() with a limit)
};

// One condition of a transaction.
struct Compare {
  enum class Target : uint8_t { version, create, mod, value, lease };
  enum class Result : uint8_t { equal, greater, less, not_equal };
  std::string key;
  Target target = Target::create;
  Result result = Result::equal;
  int64_t number = 0;  // version, create or mod revision, lease
  std::string value;   // Target::value
  // Not empty: the condition must hold for every key in [key, range_end)
  // (an empty range holds it for create, mod and version).
  std::string range_end;

  static Compare absent(std::string key);         // create_revision == 0
  static Compare value_is(std::string key, std::string value);
  static Compare mod_revision_is(std::string key, int64_t revision);
};

struct Txn;

// One operation of a transaction.
struct Op {
  enum class Kind : uint8_t { put, range, del };
  Kind kind = Kind::range;
  std::string key;
  std::string range_end;            // empty: key alone
  std::string value;                // put
  int64_t lease = 0;                // put: 0 = no lease (a put detaches a key from its lease)
  bool prev_kv = false;             // put, del: return the value before
  bool keys_only = false;           // range
  int64_t limit = 0;                // range

  static Op put(std::string key, std::string value, int64_t lease = 0, bool prev_kv = false);
  static Op get(std::string key);
  static Op get_prefix(std::string prefix, bool keys_only = false);
  static Op del(std::string key);
  static Op del_prefix(std::string prefix);
};

struct Txn {
  std::vector<Compare> compare;
  std::vector<Op> success;
  std::vector<Op> failure;
};

struct TxnResult;

struct OpResult {
  Op::Kind kind = Op::Kind::range;
  RangeResult range;                // range
  std::optional<KeyValue> prev_kv;  // put and del with prev_kv
  int64_t deleted = 0;              // del
};

struct TxnResult {
  int64_t revision = 0;
  bool succeeded = false;
  std::vector<OpResult> responses;
};

// The key that ends a range of every key starting with `prefix` (etcd's
// "range_end": the prefix with its last byte increased).
std::string prefix_end(const std::string& prefix);

class Client {
 public:
  // Checks the options (files readable, an auth file's form) without talking
  // to etcd. Errors: CC_ERR_INVALID_ARGUMENT naming the file and the fix.
  static Status create(ClientOptions options, std::unique_ptr<Client>* out);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Asks etcd for its members (and authenticates when asked to): the first
  // call a user makes, so a wrong address or password is told at once.
  Status check(Deadline deadline);

  Status range(const std::string& key, const std::string& range_end, Deadline deadline,
               RangeResult* out, bool keys_only = false, int64_t limit = 0);
  Status get(const std::string& key, Deadline deadline, std::optional<KeyValue>* out,
             int64_t* revision);
  Status put(const std::string& key, const std::string& value, int64_t lease, Deadline deadline,
             int64_t* revision = nullptr);
  Status delete_range(const std::string& key, const std::string& range_end, Deadline deadline,
                      int64_t* deleted = nullptr);
  Status txn(const Txn& txn, Deadline deadline, TxnResult* out);

  // A lease of ttl_s seconds (etcd raises it to its minimum, about 1.5 x its
  // election timeout); *granted_ttl_s says what etcd granted.
  // *revision: the store's revision when it was granted.
  Status lease_grant(int64_t ttl_s, Deadline deadline, int64_t* id,
                     int64_t* granted_ttl_s = nullptr, int64_t* revision = nullptr);
  // One keepalive; *ttl_s is the time left, 0 when the lease is gone;
  // *revision: the store's revision when it answered.
  Status lease_keepalive(int64_t id, Deadline deadline, int64_t* ttl_s,
                         int64_t* revision = nullptr);
  // Deletes the lease and every key attached to it. An unknown lease is success.
  Status lease_revoke(int64_t id, Deadline deadline);

  const Address& address() const;
  // "etcd at 127.0.0.1:2379, 127.0.0.1:2381" for messages.
  std::string where() const;
  // Members in the cluster, as etcd said at check() (0 before).
  int cluster_size() const;

  struct Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cc::rv::etcd
