// The cluster's admission store against a real etcd: a record written by the workspace's
// owner is read back by any node (also a new process: nothing is held locally), and once
// the workspace has a new owner the old one's writes fail and change nothing.
#include "backends/state/etcd_admission_store.hpp"

#include <boost/test/unit_test.hpp>

#include <map>

#include "backends/cluster/ownership.hpp"
#include "etcd_fixture.hpp"

using namespace boxrt::test;
using namespace boxrt::cluster;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(cluster_admission_store)

BOOST_FIXTURE_TEST_CASE(only_the_current_owner_writes_and_every_node_reads, etcd_fixture) {
  boxrt::net::etcd::client c{opts};
  ownership own{boxrt::net::etcd::connector(opts), "/boxrt/c1"};
  const std::string key = std::string{"instance-1\0workspace-a", 22};
  auto lease1 = c.grant(10s);
  BOOST_REQUIRE(lease1);
  auto first = own.claim("ws-a", "n1", "127.0.0.1:7101", *lease1);
  BOOST_REQUIRE(first && first->node_id == "n1");
  std::map<std::string, fence> held{{key, fence{own.owner_key("ws-a"), first->epoch}}};
  auto fence_of = [&](const std::string& k) -> std::optional<fence> {
    auto it = held.find(k);
    return it == held.end() ? std::nullopt : std::optional<fence>{it->second};
  };
  etcd_admission_store n1{boxrt::net::etcd::connector(opts), "/boxrt/c1", fence_of};
  BOOST_TEST(!n1.put(key, "revision 1"));
  // Another node (or a restarted one) reads it from etcd.
  etcd_admission_store reader{boxrt::net::etcd::connector(opts), "/boxrt/c1", [](const std::string&) { return std::optional<fence>{}; }};
  auto got = reader.get(key);
  BOOST_REQUIRE(got && *got);
  BOOST_TEST(**got == "revision 1");
  BOOST_TEST(n1.record_key(key).find('\0') == std::string::npos);
  // A node that does not own the workspace writes nothing.
  auto refused = reader.put(key, "revision 9");
  BOOST_TEST(refused.message.find("does not own") != std::string::npos, refused.message);
  // n1's lease ends; n2 takes over with a higher epoch. n1 still thinks it holds the old
  // one: its write fails and the record stays as it was.
  BOOST_REQUIRE(!c.revoke(*lease1));
  auto lease2 = c.grant(10s);
  BOOST_REQUIRE(lease2);
  auto second = own.claim("ws-a", "n2", "127.0.0.1:7102", *lease2);
  BOOST_REQUIRE(second && second->node_id == "n2");
  BOOST_TEST(second->epoch > first->epoch);
  auto stale = n1.put(key, "revision 2 from the old owner");
  BOOST_TEST(!stale.message.empty());
  BOOST_TEST(stale.message.find("lost the workspace") != std::string::npos, stale.message);
  BOOST_TEST(**reader.get(key) == "revision 1");
  etcd_admission_store n2{boxrt::net::etcd::connector(opts), "/boxrt/c1", [&](const std::string&) {
                            return std::optional<fence>{fence{own.owner_key("ws-a"), second->epoch}};
                          }};
  BOOST_TEST(!n2.put(key, "revision 2"));
  BOOST_TEST(**reader.get(key) == "revision 2");
}

BOOST_AUTO_TEST_SUITE_END()
