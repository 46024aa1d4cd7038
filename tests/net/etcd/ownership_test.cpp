// Workspace ownership against a real etcd: one owner per workspace however many nodes
// claim it at once, the owner key goes with the owner's lease, a takeover gets a higher
// epoch, and a write fenced by the old epoch fails. Rendezvous hashing agrees on every
// node and moves only the lost member's workspaces.
#include "backends/cluster/ownership.hpp"

#include <boost/test/unit_test.hpp>

#include <future>
#include <map>
#include <memory>

#include "backends/cluster/membership.hpp"
#include "etcd_fixture.hpp"

using namespace boxrt::test;
using boxrt::cluster::membership;
using boxrt::cluster::ownership;
using boxrt::cluster::preferred_owner;
using namespace std::chrono_literals;

namespace {

membership::options node(const etcd_fixture& f, const std::string& id) {
  membership::options o;
  o.store = boxrt::net::etcd::connector(f.opts);
  o.prefix = "/boxrt/c1";
  o.node_id = id;
  o.address = "127.0.0.1:71" + id.substr(1);
  o.lease = 3000ms;
  return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cluster_ownership)

BOOST_AUTO_TEST_CASE(rendezvous_hashing_agrees_spreads_and_moves_only_the_lost_members_share) {
  const std::vector<std::string> three{"n1", "n2", "n3"}, shuffled{"n3", "n1", "n2"}, two{"n1", "n2"};
  std::map<std::string, int> count;
  for (int i = 0; i < 900; ++i) {
    auto ns = "ws-" + std::to_string(i);
    auto pick = preferred_owner(ns, three);
    BOOST_TEST(pick == preferred_owner(ns, shuffled));
    ++count[pick];
    auto after = preferred_owner(ns, two);
    if (pick != "n3")
      BOOST_TEST(after == pick); // only n3's workspaces move when n3 goes
  }
  for (auto& [m, n] : count)
    BOOST_TEST(n > 200, m << " prefers " << n << " of 900");
  BOOST_TEST(preferred_owner("ws-x", {}).empty());
}

BOOST_FIXTURE_TEST_CASE(concurrent_claims_make_one_owner_and_a_takeover_a_higher_epoch, etcd_fixture) {
  std::map<std::string, std::unique_ptr<membership>> nodes;
  for (std::string id : {"n1", "n2"}) {
    nodes[id] = std::make_unique<membership>(node(*this, id));
    nodes[id]->start();
  }
  for (auto& [id, m] : nodes)
    BOOST_REQUIRE_MESSAGE(m->wait_serving(true, 10s), id << ": " << m->reason());
  ownership o1{boxrt::net::etcd::connector(opts), "/boxrt/c1"}, o2{boxrt::net::etcd::connector(opts), "/boxrt/c1"};
  auto members = o1.members();
  BOOST_REQUIRE(members);
  BOOST_TEST(members->size() == 2u);
  BOOST_TEST(members->at("n2") == "127.0.0.1:712");
  // Both claim the same workspace at once: both see the same single owner.
  auto a = std::async(std::launch::async,
                      [&] { return o1.claim("ws-a", "n1", "127.0.0.1:711", nodes["n1"]->lease_id()); });
  auto b = std::async(std::launch::async,
                      [&] { return o2.claim("ws-a", "n2", "127.0.0.1:712", nodes["n2"]->lease_id()); });
  auto ra = a.get();
  auto rb = b.get();
  BOOST_REQUIRE(ra);
  BOOST_REQUIRE(rb);
  BOOST_TEST(ra->node_id == rb->node_id);
  BOOST_TEST(ra->epoch == rb->epoch);
  BOOST_TEST(ra->epoch >= 1);
  const auto first = *ra;
  const std::string other = first.node_id == "n1" ? "n2" : "n1";
  // The owner's state is written fenced by its epoch.
  boxrt::net::etcd::client c{opts};
  BOOST_TEST(*c.put_fenced(o1.owner_key("ws-a"), first.epoch, "/boxrt/c1/admission/ws-a", "v1"));
  // The owner goes (its lease with it); the other node takes over with a higher epoch.
  nodes.erase(first.node_id);
  auto now = o1.owner_of("ws-a");
  BOOST_REQUIRE(now);
  BOOST_TEST(!*now);
  auto next = o1.claim("ws-a", other, "127.0.0.1:7100", nodes[other]->lease_id());
  BOOST_REQUIRE(next);
  BOOST_TEST(next->node_id == other);
  BOOST_TEST(next->epoch > first.epoch);
  BOOST_TEST(!*c.put_fenced(o1.owner_key("ws-a"), first.epoch, "/boxrt/c1/admission/ws-a", "stale"));
  BOOST_TEST((*c.get("/boxrt/c1/admission/ws-a"))->value == "v1");
}

BOOST_FIXTURE_TEST_CASE(a_key_of_this_node_under_an_older_lease_is_no_ownership, etcd_fixture) {
  boxrt::net::etcd::client c{opts};
  ownership o{boxrt::net::etcd::connector(opts), "/boxrt/c1"};
  auto old_lease = c.grant(10s);
  auto new_lease = c.grant(10s);
  BOOST_REQUIRE(old_lease && new_lease);
  BOOST_REQUIRE(o.claim("ws-c", "n1", "127.0.0.1:711", *old_lease));
  auto again = o.claim("ws-c", "n1", "127.0.0.1:711", *new_lease);
  BOOST_REQUIRE(!again);
  BOOST_TEST(again.error().message.find("under an earlier lease") != std::string::npos, again.error().message);
  // The same claim under the same lease (a retry) is this node's ownership.
  auto retry = o.claim("ws-c", "n1", "127.0.0.1:711", *old_lease);
  BOOST_REQUIRE(retry);
  BOOST_TEST(retry->lease == *old_lease);
  BOOST_REQUIRE(!c.revoke(*old_lease));
  auto after = o.claim("ws-c", "n1", "127.0.0.1:711", *new_lease);
  BOOST_REQUIRE(after);
  BOOST_TEST(after->lease == *new_lease);
}

BOOST_FIXTURE_TEST_CASE(a_node_without_a_lease_owns_nothing, etcd_fixture) {
  ownership o{boxrt::net::etcd::connector(opts), "/boxrt/c1"};
  auto r = o.claim("ws-b", "n1", "127.0.0.1:711", 0);
  BOOST_TEST(!r);
  auto now = o.owner_of("ws-b");
  BOOST_REQUIRE(now);
  BOOST_TEST(!*now);
}

BOOST_AUTO_TEST_SUITE_END()
