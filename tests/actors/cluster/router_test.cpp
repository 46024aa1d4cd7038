// The cluster's front door (actors/cluster/router.cpp) on CAF's deterministic test
// coordinator: its etcd is an in-memory store, its directory and its peers' routers are
// actors of the test. Membership renews on its own thread against that store; every
// actor and every pool job runs on the test's thread, in settle().
#include <boost/test/unit_test.hpp>

#include "actors/cluster/router.hpp"
#include "backends/cluster/ownership.hpp"
#include "coordinator.hpp"
#include "memory_kv.hpp"
#include "messages/tenancy.hpp"

using namespace boxrt;
using namespace std::chrono_literals;

namespace {

/// What a stand-in directory (or a peer's router) was asked.
struct calls {
  std::vector<std::string> commands;
};

/// A runtime_actor that answers box_exec with its name in stdout (or never, when `mute`)
/// and everything else with an error.
runtime_actor stand_in(caf::actor_system& sys, std::string name, std::shared_ptr<calls> seen,
                       bool mute = false) {
  return sys.spawn([name, seen, mute](runtime_actor::pointer self) {
    return with_tenant_handlers<runtime_actor::behavior_type>(
      [self, name, seen, mute](auto reply, auto atom, auto& req) -> caf::result<typename decltype(reply)::type> {
        using R = typename decltype(reply)::type;
        if constexpr (std::is_same_v<decltype(atom), exec_atom>) {
          seen->commands.push_back(req.spec.cmd);
          if (mute)
            return self->template make_response_promise<R>(); // never delivered
          exec_result r;
          r.stdout_text = "served by " + name;
          return r;
        } else {
          return to_caf_error({ec::runtime, "not in this test"});
        }
      },
      [](health_atom) -> caf::result<health_info> { return health_info{}; },
      [](init_atom, box_config&) -> caf::result<bool> { return true; },
      [](shutdown_atom) -> caf::result<int64_t> { return int64_t{0}; },
      [](ps_atom, int64_t) -> caf::result<ps_report> { return ps_report{}; });
  });
}

exec_request exec_in(const std::string& workspace, const std::string& cmd) {
  exec_request req;
  req.ctx.instance_uuid = "instance-a";
  req.ctx.workspace_uuid = workspace;
  req.spec.cmd = cmd;
  return req;
}

struct router_fixture : test::coordinated {
  test::memory_kv etcd;
  std::shared_ptr<cluster::node> node;
  std::shared_ptr<calls> local_calls = std::make_shared<calls>();
  runtime_actor router;

  explicit router_fixture(std::chrono::milliseconds takeover_wait = 5000ms, bool serve = true) {
    cluster::node_options o;
    o.node_id = "n1";
    o.address = "127.0.0.1:1";
    o.store = etcd.connector();
    o.prefix = "/t";
    o.lease = 30000ms;
    o.takeover_wait = takeover_wait;
    node = std::make_shared<cluster::node>(std::move(o));
    if (serve) {
      node->start([](int64_t) {});
      BOOST_REQUIRE(node->wait_serving(10s));
    }
    cluster::router_args args;
    args.self_node = node;
    args.pool = pool;
    args.spawn_local = [this] { return stand_in(sys, "n1's directory", local_calls); };
    router = cluster::spawn_router(sys, std::move(args));
    settle();
  }

  ~router_fixture() {
    caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    settle();
    node->stop();
  }

  /// Makes `node_id` the owner of `workspace` under a lease of its own.
  void owned_by(const std::string& node_id, const std::string& workspace) {
    auto store = etcd.connector()();
    auto lease = store->grant(30s);
    BOOST_REQUIRE(lease);
    cluster::ownership o{etcd.connector(), "/t"};
    auto claimed = o.claim(box_namespace("instance-a", workspace), node_id, "127.0.0.1:2", *lease);
    BOOST_REQUIRE(claimed);
    BOOST_REQUIRE(claimed->node_id == node_id);
  }

  void link(const std::string& node_id, const runtime_actor& peer_router) {
    caf::anon_send(caf::actor_cast<router_actor>(router), link_atom_v, node_id, std::string{"127.0.0.1:2"},
                   caf::actor_cast<caf::actor>(peer_router));
    settle();
  }
};

template <class Slot>
const exec_result& answered(const Slot& slot) {
  BOOST_REQUIRE_MESSAGE(slot->has_value(), "no answer");
  if (!slot->value())
    BOOST_FAIL("an error: " + caf::to_string(slot->value().error()));
  return *slot->value();
}

template <class Slot>
box_error refused(const Slot& slot) {
  BOOST_REQUIRE_MESSAGE(slot->has_value(), "no answer");
  BOOST_REQUIRE_MESSAGE(!static_cast<bool>(slot->value()), "answered, not refused");
  return from_caf_error(slot->value().error());
}

} // namespace

BOOST_AUTO_TEST_SUITE(router_suite)

BOOST_AUTO_TEST_CASE(a_workspace_nobody_owns_is_claimed_and_served_by_this_node) {
  router_fixture f;
  auto r = f.ask<exec_result>(f.router, exec_atom_v, exec_in("w1", "echo 1"));
  f.settle();
  BOOST_TEST(answered(r).stdout_text == "served by n1's directory");
  BOOST_TEST((f.local_calls->commands == std::vector<std::string>{"echo 1"}));
  auto ns = box_namespace("instance-a", "w1");
  auto owner = f.etcd.find("/t/owners/" + ns);
  BOOST_REQUIRE(owner);
  BOOST_TEST(owner->value.find("\"n1\"") != std::string::npos, owner->value);
  BOOST_REQUIRE(f.node->owned(ns));
  BOOST_TEST(*f.node->owned(ns) == owner->create_revision);
}

BOOST_AUTO_TEST_CASE(a_node_that_is_not_serving_refuses_with_its_reason_and_asks_nobody) {
  router_fixture f{5000ms, false};
  auto r = f.ask<exec_result>(f.router, exec_atom_v, exec_in("w1", "echo 1"));
  f.settle();
  auto e = refused(r);
  BOOST_TEST(static_cast<int>(e.code) == static_cast<int>(ec::runtime_unavailable));
  BOOST_TEST(e.message == "Box cluster node n1 is not serving: it has not started");
  BOOST_TEST(f.local_calls->commands.empty());
}

BOOST_AUTO_TEST_CASE(a_workspace_of_a_linked_member_goes_to_that_members_router) {
  router_fixture f;
  auto n2_calls = std::make_shared<calls>();
  f.link("n2", stand_in(f.sys, "n2's router", n2_calls));
  f.owned_by("n2", "w2");
  auto r = f.ask<exec_result>(f.router, exec_atom_v, exec_in("w2", "echo 2"));
  f.settle();
  BOOST_TEST(answered(r).stdout_text == "served by n2's router");
  BOOST_TEST((n2_calls->commands == std::vector<std::string>{"echo 2"}));
  BOOST_TEST(f.local_calls->commands.empty());
}

BOOST_AUTO_TEST_CASE(a_request_forwarded_to_a_member_that_is_lost_fails_as_unknown) {
  router_fixture f;
  auto n2_calls = std::make_shared<calls>();
  auto n2 = stand_in(f.sys, "n2's router", n2_calls, true);
  f.link("n2", n2);
  f.owned_by("n2", "w2");
  auto r = f.ask<exec_result>(f.router, exec_atom_v, exec_in("w2", "touch /x"));
  f.settle();
  BOOST_REQUIRE((n2_calls->commands == std::vector<std::string>{"touch /x"}));
  BOOST_TEST(!r->has_value()); // n2 holds it
  caf::anon_send_exit(n2, caf::exit_reason::kill);
  f.settle();
  auto e = refused(r);
  BOOST_TEST(e.message.starts_with("Box cluster node n2 was lost while serving the request (the link closed"),
             e.message);
  BOOST_TEST(e.message.ends_with("); its outcome is unknown"), e.message);
  // Never run twice: nothing went to this node's directory.
  BOOST_TEST(f.local_calls->commands.empty());
}

BOOST_AUTO_TEST_CASE(a_workspace_whose_owner_is_not_linked_fails_at_the_takeover_deadline) {
  router_fixture f{0ms};
  f.owned_by("n2", "w3");
  auto r = f.ask<exec_result>(f.router, exec_atom_v, exec_in("w3", "echo 3"));
  f.settle();
  BOOST_TEST(!r->has_value()); // it waits for n2 until a tick finds its deadline passed
  BOOST_REQUIRE(f.fire_timer());
  auto e = refused(r);
  BOOST_TEST(e.message == "Box cluster found no serving owner for workspace " + box_namespace("instance-a", "w3")
                            + " within 0 ms: its owner n2 is not reachable from n1");
  BOOST_TEST(f.local_calls->commands.empty());
}

BOOST_AUTO_TEST_CASE(health_goes_to_this_nodes_directory) {
  router_fixture f{5000ms, false};
  auto r = f.ask<health_info>(f.router, health_atom_v);
  f.settle();
  BOOST_REQUIRE(r->has_value());
  BOOST_TEST(static_cast<bool>(r->value()));
}

BOOST_AUTO_TEST_SUITE_END()
