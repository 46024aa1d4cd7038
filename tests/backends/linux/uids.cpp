// The sandbox uid allocator and its record (<state>/uids.sqlite): every assignment
// outlives the allocator without a scan, a session's uid is freed only with its tree, a
// pinned uid never, and a record that cannot be read is refused. No root needed.
#include "backends/linux/uids.hpp"

#include <filesystem>
#include <fstream>

#include <boost/test/unit_test.hpp>

#include "temp_dir.hpp"

using namespace boxrt;
using boxrt::testing::temp_dir;

namespace {

constexpr uint32_t first = 0x71000000u;

/// An allocator of two uids on the record at `path`, loaded as boxd loads it.
std::unique_ptr<uid_allocator> reopen(const std::string& path) {
  auto ledger = uid_ledger::open(path);
  BOOST_REQUIRE_MESSAGE(ledger.ok(), (ledger.ok() ? std::string{} : ledger.error().message));
  auto out = std::make_unique<uid_allocator>(first, first + 1, std::move(ledger.value()));
  auto loaded = out->load();
  BOOST_REQUIRE_MESSAGE(!loaded, loaded.message);
  return out;
}

uint32_t session_uid(uid_allocator& a, const std::string& sid) {
  auto uid = a.for_session(sid);
  BOOST_REQUIRE_MESSAGE(uid.ok(), (uid.ok() ? std::string{} : uid.error().message));
  return *uid;
}

uint32_t workspace_uid(uid_allocator& a, const std::string& path) {
  auto uid = a.for_workspace(path, 0); // owned by root: not a uid of the range
  BOOST_REQUIRE_MESSAGE(uid.ok(), (uid.ok() ? std::string{} : uid.error().message));
  return *uid;
}

} // namespace

BOOST_AUTO_TEST_SUITE(uids_suite)

BOOST_AUTO_TEST_CASE(an_assignment_outlives_the_allocator_without_any_scan) {
  temp_dir dir;
  const auto record = dir.str("uids.sqlite");
  // A workspace outside any tenants folder: no scan would ever find it.
  BOOST_TEST(workspace_uid(*reopen(record), "/srv/projects/alpha") == first);
  auto a = reopen(record);
  BOOST_TEST(a->assigned() == 1u);
  BOOST_TEST(workspace_uid(*a, "/srv/tenants/ws-b") == first + 1);
  auto full = a->for_session("bwrap-0123456789ab-0");
  BOOST_REQUIRE(!full.ok());
  BOOST_TEST(wire_class(full.error().code) == "BoxCapacityExceededError");
  BOOST_TEST(full.error().message
             == "Box sandbox uid range " + std::to_string(first) + "-" + std::to_string(first + 1) + " is exhausted");
  BOOST_TEST(workspace_uid(*a, "/srv/projects/alpha") == first);
  BOOST_TEST(!a->is_new_workspace("/srv/projects/alpha", 0));
}

BOOST_AUTO_TEST_CASE(a_session_uid_stays_held_until_its_tree_is_removed) {
  temp_dir dir;
  const auto record = dir.str("uids.sqlite");
  const std::string sid = "bwrap-0123456789ab-1";
  {
    auto a = reopen(record);
    BOOST_TEST(session_uid(*a, sid) == first);
    a->release(sid, false); // its tree remains
    BOOST_TEST(a->assigned() == 1u);
    // The same session id again (serials restart each run): it does not get that uid.
    BOOST_TEST(session_uid(*a, sid) == first + 1);
    a->release(sid, true);
    BOOST_TEST(a->assigned() == 1u);
  }
  auto b = reopen(record);
  BOOST_TEST(b->assigned() == 1u);
  BOOST_TEST(session_uid(*b, sid) == first + 1);
  b->release(sid, true);
  // While the tree exists the uid stays held; once it is gone, it is free.
  BOOST_TEST(b->forget_removed_sessions([](const std::string&) { return true; }) == 0u);
  BOOST_TEST(b->assigned() == 1u);
  std::string asked;
  BOOST_TEST(b->forget_removed_sessions([&](const std::string& s) {
    asked = s;
    return false;
  }) == 1u);
  BOOST_TEST(asked == sid);
  BOOST_TEST(b->assigned() == 0u);
  BOOST_TEST(session_uid(*b, "bwrap-0123456789ab-2") == first);
  b->release("bwrap-0123456789ab-2", true);
  b.reset();
  // Freed for good: the record no longer holds it.
  BOOST_TEST(reopen(record)->assigned() == 0u);
}

BOOST_AUTO_TEST_CASE(a_pinned_uid_is_never_freed) {
  temp_dir dir;
  const auto record = dir.str("uids.sqlite");
  const std::string sid = "bwrap-0123456789ab-3";
  {
    auto a = reopen(record);
    auto uid = session_uid(*a, sid);
    BOOST_REQUIRE(!a->pin(uid)); // a writable host folder was handed to it
    a->release(sid, true);
    BOOST_TEST(a->assigned() == 1u);
    BOOST_TEST(a->forget_removed_sessions([](const std::string&) { return false; }) == 0u);
    BOOST_TEST(session_uid(*a, "bwrap-0123456789ab-4") == first + 1);
    a->release("bwrap-0123456789ab-4", true);
  }
  auto b = reopen(record);
  BOOST_TEST(b->forget_removed_sessions([](const std::string&) { return false; }) == 0u);
  BOOST_TEST(b->assigned() == 1u);
  BOOST_TEST(session_uid(*b, "bwrap-0123456789ab-5") == first + 1);
  BOOST_TEST(!b->for_session("bwrap-0123456789ab-6").ok());
}

BOOST_AUTO_TEST_CASE(an_adopted_uid_is_recorded) {
  temp_dir dir;
  const auto record = dir.str("uids.sqlite");
  {
    auto a = reopen(record);
    BOOST_TEST(session_uid(*a, "bwrap-warm-0") == first);
    BOOST_TEST(a->is_new_workspace("/srv/projects/alpha", 0));
    BOOST_REQUIRE(a->give_to_workspace("bwrap-warm-0", "/srv/projects/alpha", 0));
    a->release("bwrap-warm-0", true); // the warm session holds nothing any more
    BOOST_TEST(a->assigned() == 1u);
  }
  auto b = reopen(record);
  BOOST_TEST(!b->is_new_workspace("/srv/projects/alpha", 0));
  BOOST_TEST(workspace_uid(*b, "/srv/projects/alpha") == first);
  BOOST_TEST(session_uid(*b, "bwrap-0123456789ab-7") == first + 1);
}

BOOST_AUTO_TEST_CASE(a_corrupt_record_is_refused) {
  temp_dir dir;
  const auto record = dir.str("uids.sqlite");
  std::ofstream{record} << std::string(8192, 'x');
  auto ledger = uid_ledger::open(record);
  BOOST_REQUIRE(!ledger.ok());
  BOOST_TEST(ledger.error().message.find(record) != std::string::npos, ledger.error().message);
  BOOST_TEST(ledger.error().message.find("move it aside") != std::string::npos, ledger.error().message);
  // Nothing was put in its place.
  BOOST_TEST(std::filesystem::file_size(record) == 8192u);
}

BOOST_AUTO_TEST_SUITE_END()
