// A node's membership against a real etcd: it registers under a lease it renews, serves
// only while the lease is proven, stops serving within its lease when etcd goes silent
// (paused), registers again when etcd is back, and never shares its node_id with another
// live process.
#include "backends/cluster/membership.hpp"

#include <boost/test/unit_test.hpp>

#include "etcd_fixture.hpp"

using namespace boxrt::test;
using boxrt::cluster::membership;
using namespace std::chrono_literals;

namespace {

membership::options member(const etcd_fixture& f, const std::string& node_id, std::chrono::milliseconds lease) {
  membership::options o;
  o.store = boxrt::net::etcd::connector(f.opts);
  o.prefix = "/boxrt/c1";
  o.node_id = node_id;
  o.address = "127.0.0.1:7101";
  o.lease = lease;
  return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cluster_membership)

BOOST_FIXTURE_TEST_CASE(a_node_registers_under_its_lease_and_leaves_when_it_stops, etcd_fixture) {
  boxrt::net::etcd::client c{opts};
  {
    membership m{member(*this, "n1", 3000ms)};
    BOOST_TEST(!m.serving());
    BOOST_TEST(!m.reason().empty());
    m.start();
    BOOST_REQUIRE(m.wait_serving(true, 10s));
    BOOST_TEST(m.reason().empty());
    auto key = c.get("/boxrt/c1/members/n1");
    BOOST_REQUIRE(key && *key);
    BOOST_TEST(boxrt::cluster::member_address((*key)->value) == "127.0.0.1:7101");
    BOOST_TEST((*key)->lease == m.lease_id());
  }
  // Gone with the node: its lease was revoked.
  auto key = c.get("/boxrt/c1/members/n1");
  BOOST_REQUIRE(key);
  BOOST_TEST(!*key);
}

BOOST_FIXTURE_TEST_CASE(a_node_stops_serving_within_its_lease_when_etcd_is_silent_and_comes_back, etcd_fixture) {
  membership m{member(*this, "n1", 1500ms)};
  m.start();
  BOOST_REQUIRE(m.wait_serving(true, 10s));
  pause();
  // Fail closed before etcd could expire the lease: within 2/3 of it after the last
  // renewal (the bound here leaves scheduling slack).
  BOOST_TEST(m.wait_serving(false, 3000ms));
  BOOST_TEST(!m.reason().empty());
  resume();
  BOOST_TEST(m.wait_serving(true, 30s), m.reason());
  boxrt::net::etcd::client c{opts};
  auto key = c.get("/boxrt/c1/members/n1");
  BOOST_REQUIRE(key && *key);
  BOOST_TEST((*key)->lease == m.lease_id());
}

BOOST_FIXTURE_TEST_CASE(a_lease_ended_or_a_key_taken_from_outside_stops_serving_at_once, etcd_fixture) {
  membership m{member(*this, "n1", 3000ms)};
  m.start();
  BOOST_REQUIRE(m.wait_serving(true, 10s));
  boxrt::net::etcd::client c{opts};
  // Revoked (an operator, a restored etcd): not serving before the 2 s the deadline
  // would still allow, then registered again under a new lease.
  auto first = m.lease_id();
  BOOST_REQUIRE(!c.revoke(first));
  BOOST_TEST(m.wait_serving(false, 1800ms));
  BOOST_TEST(m.wait_serving(true, 10s), m.reason());
  BOOST_TEST(m.lease_id() != first);
  // The member key deleted: found within three renewals, the lease given up (and with
  // it whatever it owned), then registered again.
  auto second = m.lease_id();
  BOOST_REQUIRE(*c.erase("/boxrt/c1/members/n1"));
  BOOST_TEST(m.wait_serving(false, 5s));
  BOOST_TEST(m.wait_serving(true, 10s), m.reason());
  BOOST_TEST(m.lease_id() != second);
  BOOST_TEST(c.keep_alive(second)->count() == 0);
}

BOOST_FIXTURE_TEST_CASE(a_second_process_with_the_same_node_id_never_serves, etcd_fixture) {
  membership first{member(*this, "n1", 3000ms)};
  first.start();
  BOOST_REQUIRE(first.wait_serving(true, 10s));
  membership second{member(*this, "n1", 3000ms)};
  second.start();
  BOOST_TEST(!second.wait_serving(true, 1500ms));
  BOOST_TEST(second.reason().find("node_id n1 is registered by another process (127.0.0.1:7101, lease ")
               != std::string::npos,
             second.reason());
  BOOST_TEST(second.reason().find("retrying until that lease ends") != std::string::npos, second.reason());
  BOOST_TEST(first.serving());
}

BOOST_AUTO_TEST_SUITE_END()
