// Where cc keeps its state in etcd: the election's keys per scope, a job's
// store keys and sessions, and keys taken apart again (a job id with '/' or
// '%' stays one element; anything else under the prefix is not cc's).
#include <catch2/catch.hpp>

#include "rendezvous/etcd/keys.hpp"

namespace keys = cc::rv::etcd::keys;

TEST_CASE("etcd keys: the daemons' election and a job's own are apart") {
  CHECK(keys::leader("cc", "") == "cc/leader");
  CHECK(keys::fence("cc", "") == "cc/fence");
  CHECK(keys::leader("cc", "job-1") == "cc/job/job-1/leader");
  CHECK(keys::fence("cc", "job-1") == "cc/job/job-1/fence");
  CHECK(keys::daemons("team/cc") == "team/cc/daemons");
  CHECK(keys::jobs("cc", "") == "cc/job/");
  CHECK(keys::jobs("cc", "a/b") == "cc/job/a%2Fb/");
}

TEST_CASE("etcd keys: a store key and a session come back as they went in") {
  const std::string k = keys::kv("cc", "team/50%", "ckpt/path");
  CHECK(k == "cc/job/team%2F50%25/kv/ckpt/path");
  auto p = keys::parse("cc", k);
  REQUIRE(p);
  CHECK(p->kind == keys::Parsed::Kind::kv);
  CHECK(p->job == "team/50%");
  CHECK(p->name == "ckpt/path");

  const std::string session("\x00\xff\x10z", 4);
  const std::string s = keys::session("cc", "j", session);
  CHECK(s == "cc/job/j/session/00ff107a");
  p = keys::parse("cc", s);
  REQUIRE(p);
  CHECK(p->kind == keys::Parsed::Kind::session);
  CHECK(p->name == session);
}

TEST_CASE("etcd keys: what is not a store key or a session is left alone") {
  CHECK_FALSE(keys::parse("cc", keys::leader("cc", "j")));
  CHECK_FALSE(keys::parse("cc", keys::fence("cc", "j")));
  CHECK_FALSE(keys::parse("cc", "other/job/j/kv/x"));
  CHECK_FALSE(keys::parse("cc", "cc/job/j%zz/kv/x"));    // a bad escape
  CHECK_FALSE(keys::parse("cc", "cc/job/j/session/0g"));  // not hex
  CHECK_FALSE(keys::parse("cc", "cc/job/nothing"));
}
