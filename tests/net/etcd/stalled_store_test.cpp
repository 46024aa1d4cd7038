// The admission state's commits against a real etcd that stalls (SIGSTOP): the commits
// wait on the worker pool, never on a scheduler thread, so another workspace is served
// at its usual pace meanwhile; the stalled commits fail their requests once etcd's
// timeout passes and change nothing.
#include "tests/actors/fixture.hpp"

#include <chrono>

#include "backends/cluster/ownership.hpp"
#include "backends/state/etcd_admission_store.hpp"
#include "etcd_fixture.hpp"

using namespace boxrt;
using namespace boxrt::test;
using namespace boxrt::cluster;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(stalled_etcd)

BOOST_FIXTURE_TEST_CASE(a_stalled_etcd_delays_no_other_workspace, etcd_fixture) {
  // This node owns every workspace of the test (one claim, its fence for every key).
  boxrt::net::etcd::client c{opts};
  ownership own{boxrt::net::etcd::connector(opts), "/boxrt/stall"};
  auto lease = c.grant(30s);
  BOOST_REQUIRE(lease);
  auto claim = own.claim("ws", "n1", "127.0.0.1:7101", *lease);
  BOOST_REQUIRE(claim);
  fence held{own.owner_key("ws"), claim->epoch};
  core_fixture::options o;
  o.admission = true;
  o.store = std::make_shared<etcd_admission_store>(boxrt::net::etcd::connector(opts), "/boxrt/stall",
                                                   [held](const std::string&) { return std::optional<fence>{held}; });
  core_fixture f{o};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-b", 1, true)).ok());
  BOOST_REQUIRE(f.exec("workspace-b", "global", "echo b").ok());
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 1, true)).ok());
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-c", 1, true)).ok());

  pause();
  // New revisions of A and C: each commit waits for etcd (its 2 s timeout), as many as
  // boxd has scheduler threads.
  caf::scoped_actor a{f.sys}, cc{f.sys};
  a->send(f.dir(), entitle_atom_v, snapshot("workspace-a", 2, true));
  cc->send(f.dir(), entitle_atom_v, snapshot("workspace-c", 2, true));
  // B needs no commit: it is served at once.
  served_beside("the stalled etcd", [&] {
    auto b = f.exec("workspace-b", "global", "echo b2");
    BOOST_REQUIRE(b.ok());
    BOOST_CHECK_EQUAL(b->stdout_text, "b2");
  });
  // A's commit fails (etcd did not answer): the request fails, revision 1 stays.
  auto receipt = reply_within<entitlement_receipt>(a, 15s);
  BOOST_REQUIRE(!receipt.ok());
  BOOST_CHECK_NE(receipt.error().message, "no reply");
  reply_within<entitlement_receipt>(cc, 15s);
  resume();
  auto again = f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 2, true));
  BOOST_REQUIRE_MESSAGE(again.ok(), (again.ok() ? std::string{} : again.error().message));
  BOOST_CHECK_EQUAL(again->entitlement_revision, 2);
  BOOST_REQUIRE(f.exec("workspace-a", "global", "echo a").ok());
}

BOOST_AUTO_TEST_SUITE_END()
