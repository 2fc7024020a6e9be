// The values of the etcd backend's call check (docs/ETCD.md "Ranks that
// disagree"), as JSON text an operator can read with etcdctl: a rank's
// latest report of its call points (gen/<g>/calls/<rank>, or a split
// child's), and the one verdict per line that the generation's rank 0 puts
// at its first difference (gen/<g>/mismatch, or a split child's). Decoding never throws: a value
// that is not ours, or a point out of range, decodes to false.
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
// rank whose report showed the difference, the words, and for a split
// child its split and color.
std::string encode_mismatch(const PeerEvent& e);
bool decode_mismatch(const std::string& text, PeerEvent* out);

}  // namespace cc::rv::etcd
