// What the host accepts from boxrt-init, which a tenant that took over its sandbox could
// write anything into: numbers beyond int64, replies whose kept bytes exceed the output
// cap or their own totals, frames longer than the reply can be, truncated frames. The
// first three were found while writing the init-protocol fuzz target
// (tests/fuzz/init_reply.cpp).
#include "backends/init/init_channel.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <string>

#include <boost/test/unit_test.hpp>

#include "backends/linux/output.hpp"

using namespace boxrt;
namespace proto = boxrt::init_protocol;
using namespace std::chrono_literals;

namespace {

std::optional<int64_t> number_of(std::string text) {
  auto payload = proto::writer{}.field(text).frame().substr(4);
  return proto::reader{payload}.number();
}

proto::exec_reply sample_reply() {
  proto::exec_reply r;
  r.exit_code = 0;
  r.stdout_kept = "hello";
  r.stdout_total = 5;
  r.stderr_kept = "";
  r.stderr_total = 0;
  r.duration_ms = 3;
  return r;
}

std::string payload_of(const proto::exec_reply& r) {
  return proto::encode(r).substr(4);
}

/// A pipe holding `bytes`, its write end closed.
int pipe_with(const std::string& bytes) {
  std::array<int, 2> fds{};
  BOOST_REQUIRE(::pipe2(fds.data(), O_CLOEXEC) == 0);
  BOOST_REQUIRE(proto::write_all(fds[1], bytes));
  ::close(fds[1]);
  return fds[0];
}

} // namespace

BOOST_AUTO_TEST_SUITE(init_channel_suite)

BOOST_AUTO_TEST_CASE(numbers_beyond_int64_are_refused_not_wrapped) {
  BOOST_TEST(number_of("9223372036854775807").value() == INT64_MAX);
  BOOST_TEST(number_of("-9223372036854775808").value() == INT64_MIN);
  BOOST_TEST(number_of("-42").value() == -42);
  BOOST_TEST(!number_of("9223372036854775808"));
  BOOST_TEST(!number_of("-9223372036854775809"));
  BOOST_TEST(!number_of("99999999999999999999"));
  BOOST_TEST(!number_of("-"));
  BOOST_TEST(!number_of("1x"));
}

BOOST_AUTO_TEST_CASE(a_consistent_reply_is_accepted) {
  auto r = init_channel::accept_reply(payload_of(sample_reply()), 1024);
  BOOST_REQUIRE(r);
  BOOST_TEST(r->stdout_kept == "hello");
}

BOOST_AUTO_TEST_CASE(a_reply_keeping_more_than_the_cap_is_refused) {
  auto r = sample_reply();
  r.stdout_kept = std::string(2048, 'x');
  r.stdout_total = 2048;
  BOOST_TEST(!init_channel::accept_reply(payload_of(r), 1024));
  BOOST_TEST(init_channel::accept_reply(payload_of(r), 2048).has_value());
}

BOOST_AUTO_TEST_CASE(a_reply_keeping_more_than_its_total_is_refused) {
  auto r = sample_reply();
  r.stdout_total = 0;  // claims nothing was written, so nothing would be clipped
  BOOST_TEST(!init_channel::accept_reply(payload_of(r), 1024));
  r = sample_reply();
  r.stderr_kept = "oops";
  r.stderr_total = 1;
  BOOST_TEST(!init_channel::accept_reply(payload_of(r), 1024));
}

BOOST_AUTO_TEST_CASE(negative_totals_and_durations_are_refused) {
  auto r = sample_reply();
  auto text = proto::writer{}
                .field("result").number(0).field("hello").number(-5)
                .field("").number(0).number(1).field("")
                .frame().substr(4);
  BOOST_TEST(!init_channel::accept_reply(text, 1024));
  r.duration_ms = -1;
  BOOST_TEST(!init_channel::accept_reply(payload_of(r), 1024));
}

BOOST_AUTO_TEST_CASE(captured_output_is_stripped_as_python_strips_decoded_text) {
  // The reference strips the decoded str: Unicode spaces and U+001C..U+001F go too.
  BOOST_CHECK_EQUAL(clip_output("\xc2\xa0 hi \xe3\x80\x80\x1f\n", 100), "hi");
  BOOST_CHECK_EQUAL(clip_output("\xe2\x80\x8bhi", 100), "\xe2\x80\x8bhi");
}

BOOST_AUTO_TEST_CASE(clipping_counts_the_kept_bytes_whatever_the_total_says) {
  auto out = clip_captured(std::string(100, 'a'), 0, 10);
  BOOST_TEST(out.rfind("aaaaaaaaaa\n... [raw output clipped at 10 bytes, 90 bytes discarded]", 0) == 0);
}

BOOST_AUTO_TEST_CASE(a_frame_longer_than_the_bound_closes_the_channel_unread) {
  auto frame = proto::encode(sample_reply());
  int fd = pipe_with(frame);
  std::string payload;
  auto st = init_channel::read_frame(fd, payload, init_channel::clock_type::now() + 5s, nullptr,
                                     static_cast<uint32_t>(frame.size() - 5));
  BOOST_TEST((st == init_channel::read_status::closed));
  BOOST_TEST(payload.empty());
  ::close(fd);
  fd = pipe_with(frame);
  st = init_channel::read_frame(fd, payload, init_channel::clock_type::now() + 5s, nullptr,
                                static_cast<uint32_t>(frame.size() - 4));
  BOOST_TEST((st == init_channel::read_status::ok));
  BOOST_TEST(payload == frame.substr(4));
  ::close(fd);
}

BOOST_AUTO_TEST_CASE(a_truncated_frame_closes_the_channel) {
  auto frame = proto::encode(sample_reply());
  int fd = pipe_with(frame.substr(0, frame.size() - 1));
  std::string payload;
  auto st = init_channel::read_frame(fd, payload, init_channel::clock_type::now() + 5s, nullptr);
  BOOST_TEST((st == init_channel::read_status::closed));
  ::close(fd);
}

BOOST_AUTO_TEST_CASE(the_reply_bound_follows_the_output_cap) {
  BOOST_TEST(init_channel::max_reply_bytes(0) == 64u * 1024);
  BOOST_TEST(init_channel::max_reply_bytes(1 << 20) == 2u * (1 << 20) + 64 * 1024);
  BOOST_TEST(init_channel::max_reply_bytes(INT64_MAX) == proto::max_frame_bytes);
}

BOOST_AUTO_TEST_SUITE_END()
