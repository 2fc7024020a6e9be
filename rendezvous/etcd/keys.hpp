// Where a job's rendezvous lives in etcd's key space. Pure: no I/O.
//
//   <prefix>/<job>/kv/<key>                the store's keys (cc_store_*)
//   <prefix>/<job>/writer/<key>            the id of the last add or compare-set that wrote <key>
//   <prefix>/<job>/gen/<g>/member/<rank>   who the rank is; on the rank's lease (its membership)
//   <prefix>/<job>/gen/<g>/result          the outcome: the id, or the failure's words
//   <prefix>/<job>/gen/<g>/roster          every member's host and pid, put with the result
//   <prefix>/<job>/gen/<g>/closing         taken by the first rank whose join deadline passed
//   <prefix>/<job>/gen/<g>/events          each departure (abort, failure), put once per rank
//   <prefix>/<job>/gen/<g>/gone/<rank>     that rank's departure was announced
//   <prefix>/<job>/gen/<g>/leaves          one put per clean leave: the last one removes gen/<g>/
//
// The job id is escaped ('%' and '/' as %25 and %2F), so no job's keys can
// fall under another's prefix. Generations keep each communicator of a job
// (and later each regrouping after a failure) apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace cc::rv::etcd {

class Keys {
 public:
  Keys(const std::string& prefix, const std::string& job_id);

  const std::string& root() const { return root_; }  // "<prefix>/<job>/"
  std::string kv(const std::string& key) const;
  std::string writer(const std::string& key) const;
  std::string kv_prefix() const { return root_ + "kv/"; }

  std::string generation(uint32_t g) const;  // "<root>gen/<g>/"
  std::string member_prefix(uint32_t g) const;
  std::string member(uint32_t g, int32_t rank) const;
  std::string result(uint32_t g) const;
  std::string roster(uint32_t g) const;
  std::string closing(uint32_t g) const;
  std::string events(uint32_t g) const;
  std::string gone(uint32_t g, int32_t rank) const;
  std::string leaves(uint32_t g) const;

  // The rank of a key made by member(g, rank); nullopt for any other key.
  std::optional<int32_t> member_rank(uint32_t g, const std::string& key) const;

 private:
  std::string root_;
};

// "a%2Fb" for "a/b": a job id as one path component.
std::string escape_component(const std::string& s);

}  // namespace cc::rv::etcd
