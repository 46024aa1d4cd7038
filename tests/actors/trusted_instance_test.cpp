// The trusted instance's cluster pin: check() never reads etcd, settle() and pin() do at
// most once until there is something to keep, and a failed read is not retried on every
// request.
#include "actors/trusted_instance.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using boxrt::trusted_instance;
using verdict = trusted_instance::verdict;

namespace {

/// A cluster pin that counts its reads and writes.
struct shared_pin {
  std::optional<std::string> value; // nullopt: etcd cannot be read
  std::atomic<int> reads{0};
  std::atomic<int> writes{0};

  void attach(trusted_instance& t, std::chrono::milliseconds retry_after) {
    t.use_shared(
      [this](std::string_view id) {
        ++writes;
        if (!value)
          return std::string{};
        if (value->empty())
          value = std::string{id};
        return *value;
      },
      [this] {
        ++reads;
        return value;
      },
      retry_after);
  }
};

/// A node's trusted instance over a cluster pin holding `value`.
struct pinned_node {
  shared_pin etcd;
  trusted_instance t;

  pinned_node(std::optional<std::string> value, std::chrono::milliseconds retry_after) {
    etcd.value = std::move(value);
    etcd.attach(t, retry_after);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(trusted_pin)

BOOST_AUTO_TEST_CASE(without_a_cluster_the_first_pin_holds_and_nothing_waits) {
  trusted_instance t;
  BOOST_CHECK(t.settled());
  BOOST_CHECK(t.check("a") == verdict::admit);
  BOOST_CHECK(t.pin("a"));
  BOOST_CHECK(!t.pin("b"));
  BOOST_CHECK(t.check("b") == verdict::refuse);
  BOOST_CHECK_EQUAL(t.get(), "a");
}

BOOST_AUTO_TEST_CASE(a_cluster_pin_is_read_once_and_kept) {
  pinned_node n{"a", std::chrono::hours{1}};
  auto& [etcd, t] = n;
  BOOST_CHECK(!t.settled());
  BOOST_CHECK(t.check("a") == verdict::unknown);
  BOOST_CHECK_EQUAL(etcd.reads.load(), 0); // check() never reads
  BOOST_CHECK(t.settle("b") == verdict::refuse);
  BOOST_CHECK_EQUAL(etcd.reads.load(), 1);
  BOOST_CHECK(t.settled());
  BOOST_CHECK(t.check("a") == verdict::admit);
  BOOST_CHECK(t.settle("a") == verdict::admit);
  BOOST_CHECK(t.pin("a"));
  BOOST_CHECK(!t.pin("b"));
  BOOST_CHECK_EQUAL(etcd.reads.load(), 1);
  BOOST_CHECK_EQUAL(etcd.writes.load(), 0);
}

BOOST_AUTO_TEST_CASE(an_unreadable_pin_refuses_and_is_not_reread_on_every_request) {
  pinned_node n{std::nullopt, std::chrono::hours{1}}; // unreadable
  auto& [etcd, t] = n;
  BOOST_CHECK(t.settle("a") == verdict::refuse);
  for (int i = 0; i < 100; ++i) {
    BOOST_CHECK(t.check("a") == verdict::refuse);
    BOOST_CHECK(t.settle("a") == verdict::refuse);
  }
  BOOST_CHECK_EQUAL(etcd.reads.load(), 1);
  BOOST_CHECK(!t.pin("a")); // a write that cannot tell refuses
  BOOST_CHECK_EQUAL(t.get(), "");
}

BOOST_AUTO_TEST_CASE(an_unreadable_pin_is_read_again_after_the_retry_interval) {
  pinned_node n{std::nullopt, std::chrono::milliseconds{0}};
  auto& [etcd, t] = n;
  BOOST_CHECK(t.settle("a") == verdict::refuse);
  etcd.value = "a"; // etcd is back
  BOOST_CHECK(t.check("a") == verdict::unknown);
  BOOST_CHECK(t.settle("a") == verdict::admit);
  BOOST_CHECK_EQUAL(etcd.reads.load(), 2);
}

BOOST_AUTO_TEST_CASE(nothing_pinned_in_the_cluster_admits_and_the_first_pin_is_kept) {
  pinned_node n{"", std::chrono::hours{1}};
  auto& [etcd, t] = n;
  BOOST_CHECK(t.settle("a") == verdict::admit);
  BOOST_CHECK(!t.settled()); // nothing to keep yet
  BOOST_CHECK(t.pin("b"));
  BOOST_CHECK_EQUAL(etcd.writes.load(), 1);
  BOOST_CHECK(t.check("a") == verdict::refuse);
  BOOST_CHECK(t.check("b") == verdict::admit);
  BOOST_CHECK(t.pin("b"));
  BOOST_CHECK_EQUAL(etcd.writes.load(), 1);
}

BOOST_AUTO_TEST_CASE(concurrent_settles_read_the_pin_once) {
  pinned_node n{"a", std::chrono::hours{1}};
  auto& [etcd, t] = n;
  std::vector<std::thread> threads;
  std::atomic<int> admitted{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      if (t.settle("a") == verdict::admit)
        ++admitted;
    });
  for (auto& th : threads)
    th.join();
  BOOST_CHECK_EQUAL(admitted.load(), 8);
  BOOST_CHECK_EQUAL(etcd.reads.load(), 1);
}

BOOST_AUTO_TEST_SUITE_END()
