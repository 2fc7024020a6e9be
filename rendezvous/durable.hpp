// Where cc's server keeps what must outlive it: each store write is handed
// here before its caller is answered, and a server that takes over reads
// everything back. The etcd implementation (rendezvous/etcd/durable_store.hpp)
// fences each write with its leadership, so a deposed server's write fails
// instead of landing. No I/O here: an interface.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace cc::rv {

// One store write as it is kept: the key's new value (none: deleted), and
// the writer's session and request, whose answer is kept beside it so a
// request sent again after a failover is answered, not applied twice.
struct DurableWrite {
  std::string job;
  std::string key;
  std::optional<std::vector<uint8_t>> value;
  std::string session;      // empty: a client that sends no session
  uint32_t request_id = 0;
  int64_t answer = 0;       // add: the total; compare-set: 1 when it swapped
};

// The last write of one session, as a server that takes over reads it back.
struct DurableSession {
  std::string job;
  std::string session;
  uint32_t request_id = 0;
  int64_t answer = 0;
};

class Durable {
 public:
  virtual ~Durable() = default;
  // Keeps the write. Errors: CC_ERR_RENDEZVOUS naming where it keeps them
  // and the cause (this server no longer leads, the store is unreachable);
  // then nothing was answered and the server must not go on serving.
  virtual Status write(const DurableWrite& w) = 0;
  // Forgets a job's keys and sessions (its job TTL passed).
  virtual Status forget_job(const std::string& job) = 0;
  // Every key and session kept, for a server that starts serving.
  virtual Status load(const std::function<void(const DurableWrite& key)>& on_key,
                      const std::function<void(const DurableSession& s)>& on_session) = 0;
  // Where it keeps them, for messages: "etcd at 127.0.0.1:2379".
  virtual std::string where() const = 0;
};

}  // namespace cc::rv
