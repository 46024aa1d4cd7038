// The admission state's commits run on the worker pool, never on a scheduler thread: a
// commit that waits (a slow disk, a stalled etcd) holds up its own workspace only, the
// reply that acknowledges a change follows its commit, and a failed commit fails the
// request and changes nothing.
#include "tests/actors/fixture.hpp"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <algorithm>
#include <vector>

using namespace boxrt;
using namespace boxrt::test;
using namespace std::chrono_literals;

namespace {

/// An admission store in memory whose next commits can be held (each then waits until
/// released, at most 5 s) or failed.
class held_store final : public admission_store {
 public:
  result<std::optional<std::string>> get(const std::string& key) override {
    std::unique_lock lock{mtx_};
    if (hold_gets_ > 0) {
      --hold_gets_;
      ++holding_;
      cv_.notify_all();
      cv_.wait_for(lock, 20s, [&] { return released_; });
      --holding_;
    }
    auto i = rows_.find(key);
    return i == rows_.end() ? std::optional<std::string>{} : std::optional<std::string>{i->second};
  }

  box_error put(const std::string& key, const std::string& state) override {
    std::unique_lock lock{mtx_};
    // Held: the next n commits, or once each the commit of a named workspace (another
    // workspace's late commit must not take a held slot).
    auto named = std::find_if(hold_keys_.begin(), hold_keys_.end(),
                              [&](const std::string& w) { return key.find(w) != std::string::npos; });
    const bool hold = named != hold_keys_.end() || (hold_keys_.empty() && hold_next_ > 0);
    if (named != hold_keys_.end())
      hold_keys_.erase(named);
    if (hold) {
      if (hold_next_ > 0)
        --hold_next_;
      ++holding_;
      cv_.notify_all();
      cv_.wait_for(lock, 5s, [&] { return released_; });
      --holding_;
    }
    if (std::exchange(fail_next_, false))
      return box_error{ec::box_error, "test: the commit failed"};
    rows_[key] = state;
    ++commits_;
    ++commits_by_key_[key];
    return {};
  }

  /// The next commit of each of these workspaces waits.
  void hold_workspaces(std::vector<std::string> workspaces) {
    std::lock_guard lock{mtx_};
    hold_keys_ = std::move(workspaces);
    released_ = false;
  }
  /// Commits of keys naming `workspace`.
  uint64_t commits_of(const std::string& workspace) {
    std::lock_guard lock{mtx_};
    uint64_t n = 0;
    for (const auto& [key, count] : commits_by_key_)
      if (key.find(workspace) != std::string::npos)
        n += count;
    return n;
  }
  void hold_next(int n = 1) {
    std::lock_guard lock{mtx_};
    hold_next_ = n;
    released_ = false;
  }
  /// The next `n` reads (a workspace's record, read before its supervisor starts) wait.
  void hold_gets(int n) {
    std::lock_guard lock{mtx_};
    hold_gets_ = n;
    released_ = false;
  }
  void fail_next() {
    std::lock_guard lock{mtx_};
    fail_next_ = true;
  }
  /// Waits (at most 10 s) until `n` held commits have begun.
  bool wait_holding(int n = 1) {
    std::unique_lock lock{mtx_};
    return cv_.wait_for(lock, 10s, [&] { return holding_ >= n; });
  }
  void release() {
    std::lock_guard lock{mtx_};
    released_ = true;
    cv_.notify_all();
  }
  uint64_t commits() {
    std::lock_guard lock{mtx_};
    return commits_;
  }

 private:
  std::mutex mtx_;
  std::condition_variable cv_;
  std::map<std::string, std::string> rows_;
  std::map<std::string, uint64_t> commits_by_key_;
  std::vector<std::string> hold_keys_;
  int hold_next_ = 0, hold_gets_ = 0, holding_ = 0;
  bool released_ = false, fail_next_ = false;
  uint64_t commits_ = 0;
};

core_fixture::options with_store(const std::shared_ptr<held_store>& store) {
  core_fixture::options o;
  o.admission = true;
  o.store = store;
  return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(admission_commits)

BOOST_AUTO_TEST_CASE(a_held_commit_delays_no_other_workspace_and_the_reply_follows_it) {
  auto store = std::make_shared<held_store>();
  core_fixture f{with_store(store)};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-b", 1, true)).ok());
  BOOST_REQUIRE(f.exec("workspace-b", "global", "echo b").ok());

  // The entitlements of A and C wait in their commits (5 s at most): as many as boxd has
  // scheduler threads, so a commit on one of them would stall every workspace.
  store->hold_workspaces({"workspace-a", "workspace-c"});
  caf::scoped_actor a{f.sys}, c{f.sys};
  a->send(f.dir(), entitle_atom_v, snapshot("workspace-a", 1, true));
  c->send(f.dir(), entitle_atom_v, snapshot("workspace-c", 1, true));
  BOOST_REQUIRE(store->wait_holding(2));
  // A's next request waits behind the commit; B is served meanwhile, at its usual pace.
  caf::scoped_actor a2{f.sys};
  a2->send(f.dir(), exec_atom_v, exec_req("workspace-a", "global", "echo a"));
  served_beside("A's held commit", [&] {
    auto b = f.exec("workspace-b", "global", "echo b2");
    BOOST_REQUIRE(b.ok());
    BOOST_CHECK_EQUAL(b->stdout_text, "b2");
  });
  // Nothing of A is answered before its commit is done.
  BOOST_CHECK(!answered<entitlement_receipt>(a));
  BOOST_CHECK(!answered<exec_result>(a2));
  // (B may commit meanwhile: its exec's own state is no part of this test.)
  BOOST_CHECK_EQUAL(store->commits_of("workspace-a") + store->commits_of("workspace-c"), 0u);

  store->release();
  BOOST_REQUIRE(reply_within<entitlement_receipt>(a).ok());
  BOOST_CHECK(store->commits_of("workspace-a") > 0); // durable before acknowledged
  auto ran = reply_within<exec_result>(a2);
  BOOST_REQUIRE_MESSAGE(ran.ok(), (ran.ok() ? std::string{} : ran.error().message));
  BOOST_CHECK_EQUAL(ran->stdout_text, "a");
}

BOOST_AUTO_TEST_CASE(a_failed_commit_fails_the_request_and_changes_nothing) {
  auto store = std::make_shared<held_store>();
  core_fixture f{with_store(store)};
  store->fail_next();
  auto r = f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 1, true));
  require_error(r, ec::box_error, "test: the commit failed");
  // The snapshot was not kept: A is refused exactly as a workspace never entitled.
  auto a = f.exec("workspace-a", "global", "echo a");
  auto c = f.exec("workspace-c", "global", "echo c");
  BOOST_REQUIRE(!a.ok() && !c.ok());
  BOOST_CHECK_EQUAL(a.error().message, c.error().message);
  // The same snapshot again commits and admits.
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 1, true)).ok());
  auto again = f.exec("workspace-a", "global", "echo a");
  BOOST_REQUIRE(again.ok());
  BOOST_CHECK_EQUAL(again->stdout_text, "a");
}

BOOST_AUTO_TEST_CASE(a_gate_that_waits_for_a_commit_takes_its_request_up_again) {
  // A list of a new placement generation advances the fence in its gate: the request
  // waits for that commit (its message is taken up again after it), then is answered.
  auto store = std::make_shared<held_store>();
  core_fixture f{with_store(store)};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-a", 1, true)).ok());
  BOOST_REQUIRE(f.exec("workspace-a", "global", "echo 1", 1).ok());
  const auto before = store->commits();
  store->hold_next();
  caf::scoped_actor a{f.sys};
  a->send(f.dir(), list_atom_v, ctx("workspace-a", 2));
  BOOST_REQUIRE(store->wait_holding());
  BOOST_CHECK(!answered<std::vector<session_info>>(a));
  store->release();
  auto listed = reply_within<std::vector<session_info>>(a);
  BOOST_REQUIRE_MESSAGE(listed.ok(), (listed.ok() ? std::string{} : listed.error().message));
  BOOST_CHECK(listed->empty()); // generation 1's session is retired
  BOOST_CHECK(store->commits() > before);
  BOOST_CHECK(!f.exec("workspace-a", "global", "echo 1", 1).ok()); // fenced
  // A commit that fails in a gate fails that request; the next one commits again.
  store->fail_next();
  const auto before_failure = store->commits();
  auto failed = f.call<std::vector<session_info>>(list_atom_v, ctx("workspace-a", 3));
  require_error(failed, ec::box_error, "test: the commit failed");
  BOOST_CHECK_EQUAL(store->commits(), before_failure);
  BOOST_CHECK(f.call<std::vector<session_info>>(list_atom_v, ctx("workspace-a", 3)).ok());
  BOOST_CHECK(store->commits() > before_failure);
  auto ran = f.exec("workspace-a", "global", "echo 3", 3);
  BOOST_REQUIRE(ran.ok());
  BOOST_CHECK_EQUAL(ran->stdout_text, "3");
}

BOOST_AUTO_TEST_CASE(a_held_record_read_delays_no_other_workspace) {
  // A workspace's record is read before its supervisor starts, on the worker pool: no
  // scheduler thread waits for it (two held reads, as many as boxd has such threads).
  auto store = std::make_shared<held_store>();
  core_fixture f{with_store(store)};
  BOOST_REQUIRE(f.call<entitlement_receipt>(entitle_atom_v, snapshot("workspace-b", 1, true)).ok());
  BOOST_REQUIRE(f.exec("workspace-b", "global", "echo b").ok());
  store->hold_gets(2);
  caf::scoped_actor a{f.sys}, c{f.sys};
  a->send(f.dir(), entitle_atom_v, snapshot("workspace-a", 1, true));
  c->send(f.dir(), entitle_atom_v, snapshot("workspace-c", 1, true));
  BOOST_REQUIRE_MESSAGE(store->wait_holding(2), "pool threads " << f.pool->threads() << " idle " << f.pool->idle()
                                                                 << " queued " << f.pool->queued());
  // A second first use of A joins the first: one read, one supervisor.
  caf::scoped_actor a2{f.sys};
  a2->send(f.dir(), exec_atom_v, exec_req("workspace-a", "global", "echo a"));
  served_beside("the reads of A and C", [&] { BOOST_REQUIRE(f.exec("workspace-b", "global", "echo b2").ok()); });
  store->release();
  BOOST_REQUIRE(reply_within<entitlement_receipt>(a).ok());
  auto ran = reply_within<exec_result>(a2);
  BOOST_REQUIRE_MESSAGE(ran.ok(), (ran.ok() ? std::string{} : ran.error().message));
  BOOST_CHECK_EQUAL(ran->stdout_text, "a");
  c->receive([](entitlement_receipt&) {}, [](caf::error&) {}, caf::after(std::chrono::seconds{10}) >> [] {});
}

BOOST_AUTO_TEST_SUITE_END()
