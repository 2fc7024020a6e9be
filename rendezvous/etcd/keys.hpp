// Where cc keeps its state in etcd's key space. Pure: no I/O.
//
//   <prefix>/daemons                   present once a cc-rendezvous daemon served here
//   <prefix>/leader                    the daemons' leader: its address, on its lease
//   <prefix>/fence                     put by each of that leader's writes
//   <prefix>/job/<job>/leader          a job's own host, where no daemon leads
//   <prefix>/job/<job>/fence           put by each of that host's writes
//   <prefix>/job/<job>/kv/<key>        a store key's value
//   <prefix>/job/<job>/session/<hex>   a client session's last write: "<request id> <answer>"
//
// A job id is written with '%' and '/' escaped (%25, %2F), so it is one
// path element; store keys follow kv/ as they are.
#pragma once

#include <optional>
#include <string>

namespace cc::rv::etcd::keys {

std::string daemons(const std::string& prefix);
// The election's key and its fence for a scope ("": the daemons; else a job).
std::string leader(const std::string& prefix, const std::string& scope);
std::string fence(const std::string& prefix, const std::string& scope);
// Every job's keys (scope ""), or one job's.
std::string jobs(const std::string& prefix, const std::string& scope);
std::string job(const std::string& prefix, const std::string& job);
std::string kv(const std::string& prefix, const std::string& job, const std::string& key);
std::string session(const std::string& prefix, const std::string& job, const std::string& session);

// A key under jobs(prefix, ""), taken apart.
struct Parsed {
  enum class Kind { kv, session } kind = Kind::kv;
  std::string job;
  std::string name;  // the store key, or the session's bytes
};
std::optional<Parsed> parse(const std::string& prefix, const std::string& key);

}  // namespace cc::rv::etcd::keys
