// What a rank and its node's agent say to each other on etcd (node_link.hpp
// on the rank's side, node_agent.hpp on the agent's): one JSON object a
// line over the agent's Unix socket. Pure: no I/O. Private to
// rendezvous/etcd.
//
//   rank -> agent                                   agent -> rank
//   {"op":"lease","id":n}                           {"id":n,"lease":"L","ttl":s,"node":words}
//   {"op":"claim","id":n,"txn":{gateway txn}}       {"id":n,"answer":{gateway answer}}
//                                                   or {"id":n,"error":words,"code":c}
//   {"op":"watch","id":n,"specs":[spec...]}         {"watch":n,"events":[event...]}
//   {"op":"unwatch","id":n}
//   {"op":"own","key":k}       a key the rank puts on the node's lease
//   {"op":"member",...}        the rank became a member of a generation
//   {"op":"left","gen":g}      it left that generation (no departure to tell)
//   {"op":"ended","gen":g}     it told its own departure: its keys go
//                                                   {"lease_lost":"L"} the node's lease expired
//                                                   {"kept":true} etcd answered a keepalive
//
// Keys and values are base64 (a job id may hold any byte).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "rendezvous/etcd/client.hpp"

namespace cc::rv::etcd::node {

using json = nlohmann::json;

// A rank's membership of one generation: what its agent needs to tell the
// others when the rank's process ends without leaving.
struct Membership {
  std::string generation;  // Keys::generation(): the prefix of every key of it
  std::string gone;        // Keys::gone(g, rank)
  std::string events;      // Keys::events(g)
  int32_t rank = 0;        // in the generation (the peer event's rank)
  std::string host;
  uint32_t pid = 0;
};

json spec_json(const WatchSpec& s);
std::optional<WatchSpec> parse_spec(const json& j);
json event_json(const WatchEvent& e);
std::optional<WatchEvent> parse_event(const json& j);
json membership_json(const Membership& m);
std::optional<Membership> parse_membership(const json& j);

// A key field (base64) of a message; nullopt when absent or not base64.
std::optional<std::string> key_field(const json& j, const char* field);
// A line of text: one JSON object, nullopt when it is not one.
std::optional<json> parse_line(const std::string& line);

}  // namespace cc::rv::etcd::node
