// boxd's start-up configuration: the server section's limits are read, bounded and
// named in the error when out of range.
#include <boost/test/unit_test.hpp>

#include <utility>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/boxd_config.hpp"

namespace fs = std::filesystem;

namespace {

std::string no_env(const char*) { return {}; }

struct config_file {
  explicit config_file(const std::string& text)
    : path(fs::temp_directory_path() / ("boxd-config-test-" + std::to_string(::getpid()) + ".json")) {
    std::ofstream{path} << text;
  }
  ~config_file() { fs::remove(path); }
  fs::path path;
};

boxrt::result<boxrt::boxd_config> load(const std::string& server_json) {
  config_file f{R"({"server": )" + server_json + "}"};
  return boxrt::load_boxd_config({"--config", f.path.string()}, no_env);
}

} // namespace

BOOST_AUTO_TEST_SUITE(boxd_config)

BOOST_AUTO_TEST_CASE(io_threads_and_spin_have_defaults_and_are_read) {
  auto d = boxrt::default_boxd_config();
  BOOST_CHECK_EQUAL(d.server.io_threads, 1u);
  BOOST_CHECK_EQUAL(d.server.io_spin_us, 50u);
  auto c = load(R"({"io_threads": 2, "io_spin_us": 0})");
  BOOST_REQUIRE(c);
  BOOST_CHECK_EQUAL(c->server.io_threads, 2u);
  BOOST_CHECK_EQUAL(c->server.io_spin_us, 0u);
}

BOOST_AUTO_TEST_CASE(log_format_is_text_by_default_and_json_on_request) {
  BOOST_CHECK(!boxrt::default_boxd_config().server.log_json);
  auto json = load(R"({"log_format": "json"})");
  BOOST_REQUIRE(json);
  BOOST_CHECK(json->server.log_json);
  auto text = load(R"({"log_format": "text"})");
  BOOST_REQUIRE(text);
  BOOST_CHECK(!text->server.log_json);
  for (auto bad : {R"({"log_format": "xml"})", R"({"log_format": 1})"}) {
    auto r = load(bad);
    BOOST_REQUIRE(!r);
    BOOST_CHECK_NE(r.error().message.find("server.log_format must be \"text\" or \"json\""), std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(relay_attach_wait_has_a_default_and_is_read) {
  BOOST_CHECK_EQUAL(boxrt::default_boxd_config().server.relay_attach_wait_ms, 30000u);
  auto c = load(R"({"relay_attach_wait_ms": 250})");
  BOOST_REQUIRE(c);
  BOOST_CHECK_EQUAL(c->server.relay_attach_wait_ms, 250u);
  auto big = load(R"({"relay_attach_wait_ms": 3600001})");
  BOOST_REQUIRE(!big);
  BOOST_CHECK_NE(big.error().message.find("server.relay_attach_wait_ms must be between 0 and 3600000"),
                 std::string::npos);
}

BOOST_AUTO_TEST_CASE(out_of_range_limits_are_refused_by_name) {
  auto spin = load(R"({"io_spin_us": 10001})");
  BOOST_REQUIRE(!spin);
  BOOST_CHECK_NE(spin.error().message.find("server.io_spin_us must be between 0 and 10000"),
                 std::string::npos);
  auto threads = load(R"({"io_threads": 0})");
  BOOST_REQUIRE(!threads);
  BOOST_CHECK_NE(threads.error().message.find("server.io_threads must be between 1 and 64"),
                 std::string::npos);
  auto typed = load(R"({"max_inflight": "many"})");
  BOOST_REQUIRE(!typed);
  BOOST_CHECK_NE(typed.error().message.find("server.max_inflight must be an integer"),
                 std::string::npos);
}

BOOST_AUTO_TEST_CASE(connection_bounds_have_defaults_and_are_read) {
  auto d = boxrt::default_boxd_config().server;
  BOOST_CHECK_EQUAL(d.max_outbound_bytes, size_t{64} << 20);
  BOOST_CHECK_EQUAL(d.max_outbound_frames, 4096u);
  BOOST_CHECK_EQUAL(d.outbound_stall_ms, 30000u);
  BOOST_CHECK_EQUAL(d.max_pending_handshakes, 256u);
  BOOST_CHECK_EQUAL(d.handshake_timeout_ms, 5000u);
  BOOST_CHECK_EQUAL(d.reserved_fds, 256u);
  BOOST_CHECK(!d.compression);
  auto c = load(R"({"max_outbound_bytes": 1048576, "max_outbound_frames": 64,
    "outbound_stall_ms": 250, "max_pending_handshakes": 8, "handshake_timeout_ms": 100,
    "reserved_fds": 0, "compression": true})");
  BOOST_REQUIRE(c);
  BOOST_CHECK_EQUAL(c->server.max_outbound_bytes, 1048576u);
  BOOST_CHECK_EQUAL(c->server.max_outbound_frames, 64u);
  BOOST_CHECK_EQUAL(c->server.outbound_stall_ms, 250u);
  BOOST_CHECK_EQUAL(c->server.max_pending_handshakes, 8u);
  BOOST_CHECK_EQUAL(c->server.handshake_timeout_ms, 100u);
  BOOST_CHECK_EQUAL(c->server.reserved_fds, 0u);
  BOOST_CHECK(c->server.compression);
  for (auto [json, message] : {
         std::pair{R"({"max_outbound_bytes": 100})", "server.max_outbound_bytes must be between"},
         {R"({"max_outbound_frames": 1})", "server.max_outbound_frames must be between 16"},
         {R"({"outbound_stall_ms": 10})", "server.outbound_stall_ms must be between 100"},
         {R"({"max_pending_handshakes": 0})", "server.max_pending_handshakes must be between 1"},
         {R"({"handshake_timeout_ms": 5})", "server.handshake_timeout_ms must be between 100"},
         {R"({"reserved_fds": -1})", "server.reserved_fds must be"},
         {R"({"compression": "yes"})", "server.compression must be a boolean"}}) {
    BOOST_TEST_CONTEXT(json) {
      auto bad = load(json);
      BOOST_REQUIRE(!bad);
      BOOST_CHECK_NE(bad.error().message.find(message), std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(init_state_is_a_flag) {
  config_file f{R"({"server": {}})"};
  auto c = boxrt::load_boxd_config({"--config", f.path.string(), "--init-state"}, no_env);
  BOOST_REQUIRE(c);
  BOOST_CHECK(c->init_state);
  BOOST_CHECK(!boxrt::default_boxd_config().init_state);
}

BOOST_AUTO_TEST_SUITE_END()
