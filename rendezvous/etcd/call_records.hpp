// The values of the etcd backend's call check (docs/ETCD.md "Ranks that
// disagree"), as JSON text an operator can read with etcdctl: a rank's
// latest report of its call points (gen/<g>/calls/<rank>), and the one
// verdict that the generation's rank 0 puts at the first difference
// (gen/<g>/mismatch). Decoding never throws: a value that is not ours, or a
// point out of range, decodes to false.
#pragma once

#include <string>

#include "rendezvous/protocol.hpp"
#include "rendezvous/rules/call_check.hpp"

namespace cc::rv::etcd {

// A report carries who made it, so that the words name the rank as it joined
// (host and pid), exactly as cc's server names it.
bool decode(const std::string& text, rules::CallReport* out);
std::string encode(const rules::CallReport& r);

// The verdict is the very peer event every rank gets: kind mismatch, the
// rank whose report showed the difference, and the words.
std::string encode_mismatch(const PeerEvent& e);
bool decode_mismatch(const std::string& text, PeerEvent* out);

}  // namespace cc::rv::etcd
