// The etcd client against a real etcd (Debian's etcd-server, installed by
// scripts/bootstrap), started by the fixture on loopback with a data folder of its own.
// Every wait is bounded and polls an observed condition.
#include "net/etcd/client.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>

#include "etcd_fixture.hpp"

using namespace boxrt::test;
namespace etcd = boxrt::net::etcd;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(etcd_client)

BOOST_FIXTURE_TEST_CASE(keys_round_trip_and_a_prefix_lists_only_its_own, etcd_fixture) {
  etcd::client c{opts};
  std::string binary{"\0\x01\xff value", 9};
  BOOST_REQUIRE(c.put("/c1/members/n1", "a"));
  BOOST_REQUIRE(c.put("/c1/members/n2", binary));
  BOOST_REQUIRE(c.put("/c10/members/x", "other cluster"));
  auto n2 = c.get("/c1/members/n2");
  BOOST_REQUIRE(n2 && *n2);
  BOOST_TEST((*n2)->value == binary);
  BOOST_TEST((*n2)->create_revision > 0);
  auto listed = c.list("/c1/members/");
  BOOST_REQUIRE(listed);
  BOOST_REQUIRE_EQUAL(listed->size(), 2u);
  BOOST_TEST(listed->at(0).key == "/c1/members/n1");
  BOOST_TEST(listed->at(1).key == "/c1/members/n2");
  BOOST_TEST(*c.erase("/c1/members/n1"));
  BOOST_TEST(!*c.erase("/c1/members/n1"));
  auto gone = c.get("/c1/members/n1");
  BOOST_REQUIRE(gone);
  BOOST_TEST(!*gone);
}

BOOST_FIXTURE_TEST_CASE(create_makes_a_key_once_and_reports_the_owner_after, etcd_fixture) {
  etcd::client a{opts}, b{opts};
  auto first = a.create("/c1/owners/ws-1", "n1");
  BOOST_REQUIRE(first);
  BOOST_TEST(first->created);
  auto second = b.create("/c1/owners/ws-1", "n2");
  BOOST_REQUIRE(second);
  BOOST_TEST(!second->created);
  BOOST_REQUIRE(second->existing);
  BOOST_TEST(second->existing->value == "n1");
  // The creating call's revision is the key's create revision: the ownership epoch.
  BOOST_TEST(second->existing->create_revision == first->revision);
}

BOOST_FIXTURE_TEST_CASE(a_fenced_put_holds_only_for_the_current_epoch, etcd_fixture) {
  etcd::client c{opts};
  auto owner = c.create("/c1/owners/ws-2", "n1");
  BOOST_REQUIRE(owner && owner->created);
  auto epoch = owner->revision;
  BOOST_TEST(*c.put_fenced("/c1/owners/ws-2", epoch, "/c1/admission/ws-2", "state-1"));
  // A takeover: the owner key is made again, with a newer create revision.
  BOOST_REQUIRE(*c.erase("/c1/owners/ws-2"));
  auto next = c.create("/c1/owners/ws-2", "n2");
  BOOST_REQUIRE(next && next->created);
  BOOST_TEST(next->revision > epoch);
  BOOST_TEST(!*c.put_fenced("/c1/owners/ws-2", epoch, "/c1/admission/ws-2", "stale"));
  BOOST_TEST((*c.get("/c1/admission/ws-2"))->value == "state-1");
  BOOST_TEST(*c.put_fenced("/c1/owners/ws-2", next->revision, "/c1/admission/ws-2", "state-2"));
  BOOST_TEST((*c.get("/c1/admission/ws-2"))->value == "state-2");
}

BOOST_FIXTURE_TEST_CASE(a_lease_holds_its_keys_until_revoked_or_expired, etcd_fixture) {
  etcd::client c{opts};
  auto lease = c.grant(2000ms);
  BOOST_REQUIRE(lease);
  BOOST_REQUIRE(c.create("/c1/members/n1", "127.0.0.1:7101", *lease));
  BOOST_TEST((*c.get("/c1/members/n1"))->lease == *lease);
  auto ttl = c.keep_alive(*lease);
  BOOST_REQUIRE(ttl);
  BOOST_TEST(ttl->count() > 0);
  BOOST_REQUIRE(!c.revoke(*lease));
  BOOST_TEST(!*c.get("/c1/members/n1"));
  BOOST_TEST(c.keep_alive(*lease)->count() == 0);
  BOOST_TEST(!c.revoke(*lease)); // gone already: no error
  // Not renewed, a lease expires and takes its keys along.
  auto short_lease = c.grant(1000ms);
  BOOST_REQUIRE(short_lease);
  BOOST_REQUIRE(c.put("/c1/owners/ws-3", "n1", *short_lease));
  BOOST_TEST(within(15s, [&] {
    auto r = c.get("/c1/owners/ws-3");
    return r && !*r;
  }));
}

BOOST_AUTO_TEST_CASE(an_unreachable_etcd_is_a_runtime_error_within_the_timeout) {
  etcd::options o;
  o.endpoints = {"http://127.0.0.1:" + std::to_string(free_port()), "https://127.0.0.1:1"};
  o.timeout = 1000ms;
  etcd::client c{o};
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.get("/x");
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error().code == boxrt::ec::runtime_unavailable));
  BOOST_TEST(r.error().message.find("etcd is not reachable") != std::string::npos, r.error().message);
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < 5s));
}

BOOST_AUTO_TEST_SUITE_END()
