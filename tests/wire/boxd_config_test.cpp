// boxd's start-up configuration: the server section's limits are read, bounded and
// named in the error when out of range.
#include <boost/test/unit_test.hpp>

#include <utility>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

BOOST_AUTO_TEST_CASE(stream_settings_have_defaults_are_read_and_size_frames) {
  auto d = boxrt::default_boxd_config().server;
  BOOST_CHECK_EQUAL(d.stream_keepalive_ms, 5000u);
  BOOST_CHECK_EQUAL(d.max_stream_output_bytes, size_t{1} << 30);
  BOOST_CHECK_EQUAL(d.stream_stop_grace_ms, 2000u);
  auto c = load(R"({"stream_keepalive_ms": 250, "max_stream_output_bytes": 4096, "stream_stop_grace_ms": 0,
                    "max_message_bytes": 4096})");
  BOOST_REQUIRE(c);
  auto p = boxrt::net::stream_settings(c->server);
  BOOST_CHECK_EQUAL(p.keepalive_ms, 250);
  BOOST_CHECK_EQUAL(p.max_output_bytes, 4096);
  BOOST_CHECK_EQUAL(p.stop_grace_ms, 0);
  // Every byte escaped as \u00XX, a frame's message stays within max_message_bytes...
  BOOST_CHECK_LE(p.max_chunk_bytes * 6 + 512, 4096);
  // ... and within the SDK's 1 MiB however large the server's limit.
  auto large = boxrt::net::stream_settings(boxrt::default_boxd_config().server);
  BOOST_CHECK_LE(large.max_chunk_bytes * 6 + 512, 1 << 20);
  for (auto bad : {R"({"stream_keepalive_ms": 99})", R"({"stream_keepalive_ms": "5000"})",
                   R"({"max_stream_output_bytes": 0})", R"({"stream_stop_grace_ms": -1})"})
    BOOST_CHECK_MESSAGE(!load(bad), bad);
}

BOOST_AUTO_TEST_CASE(file_action_limits_have_defaults_and_are_read) {
  auto d = boxrt::default_boxd_config().server;
  BOOST_CHECK_EQUAL(d.max_file_call_bytes, size_t{1} << 20);
  BOOST_CHECK_EQUAL(d.max_list_entries, 10000u);
  auto c = load(R"({"max_file_call_bytes": 4096, "max_list_entries": 3})");
  BOOST_REQUIRE(c);
  BOOST_CHECK_EQUAL(c->server.max_file_call_bytes, 4096u);
  BOOST_CHECK_EQUAL(c->server.max_list_entries, 3u);
  for (auto bad : {R"({"max_file_call_bytes": 0})", R"({"max_file_call_bytes": 67108865})",
                   R"({"max_list_entries": 0})", R"({"max_list_entries": "3"})"})
    BOOST_CHECK_MESSAGE(!load(bad), bad);
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

BOOST_AUTO_TEST_CASE(an_unknown_server_key_is_refused_with_its_path) {
  for (auto [bad, key] : {std::pair{R"({"port": 5411})", "server.port"},
                          std::pair{R"({"listen": "127.0.0.1:0", "host": "127.0.0.1"})", "server.host"},
                          std::pair{R"({"max_inflite": 4})", "server.max_inflite"}}) {
    auto r = load(bad);
    BOOST_REQUIRE_MESSAGE(!r, bad);
    BOOST_CHECK_MESSAGE(r.error().message.find("unknown key " + std::string{key}) != std::string::npos,
                        r.error().message);
  }
}

BOOST_AUTO_TEST_CASE(ignored_box_keys_are_named_and_never_change_the_config) {
  config_file f{R"({"box": {"bakend": "nsjail", "limits": {"max_sesions": 3, "max_sessions": 7},
                            "local": {"host_rot": "/x"}, "profile": "default"}})"};
  auto c = boxrt::load_boxd_config({"--config", f.path.string()}, no_env);
  BOOST_REQUIRE(c);
  BOOST_CHECK_EQUAL(c->box.backend, "auto");
  BOOST_CHECK_EQUAL(c->box.limits.max_sessions, 7);
  std::vector<std::string> want{"box.bakend", "box.profile", "box.limits.max_sesions", "box.local.host_rot"};
  BOOST_CHECK_EQUAL_COLLECTIONS(c->ignored.begin(), c->ignored.end(), want.begin(), want.end());
  size_t named = 0;
  for (const auto& w : c->warnings)
    named += w.find("is not a key boxd uses; ignored") != std::string::npos;
  BOOST_CHECK_EQUAL(named, 4u);
  auto printed = boxrt::effective_config(*c);
  BOOST_CHECK(printed.find("\"box.limits.max_sesions\"") != std::string::npos);
  // The defaults are printed, the token never is.
  BOOST_CHECK(printed.find("\"max_inflight\": 128") != std::string::npos);
  BOOST_CHECK(printed.find("\"control_token\": \"(not set)\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_refused_admission_policy_stops_boxd_with_the_validators_text) {
  for (auto [policy, text] : {std::pair{R"({"memory_mb": 8})", "box.admission: memory_mb must be at least 32"},
                              std::pair{R"({"required": "yes"})", "box.admission: required must be a boolean"}}) {
    config_file f{std::string{R"({"box": {"admission": )"} + policy + "}}"};
    auto c = boxrt::load_boxd_config({"--config", f.path.string()}, no_env);
    BOOST_REQUIRE(!c);
    BOOST_CHECK_MESSAGE(c.error().message.find(text) != std::string::npos, c.error().message);
  }
}

BOOST_AUTO_TEST_CASE(the_upload_folder_follows_the_data_folder) {
  BOOST_CHECK_EQUAL(boxrt::default_boxd_config().box.local.host_root, "data/box");
  config_file f{R"({"box": {"local": {"host_root": "/srv/boxrt/box/"}}})"};
  auto c = boxrt::load_boxd_config({"--config", f.path.string()}, no_env);
  BOOST_REQUIRE(c);
  BOOST_CHECK_EQUAL(c->server.transfer_dir, "/srv/boxrt/temp/lbp");
  auto d = boxrt::load_boxd_config({"--data-dir", "/var/lib/boxrt"}, no_env);
  BOOST_REQUIRE(d);
  BOOST_CHECK_EQUAL(d->box.local.host_root, "/var/lib/boxrt/box");
  BOOST_CHECK_EQUAL(d->server.transfer_dir, "/var/lib/boxrt/temp/lbp");
  auto plain = boxrt::load_boxd_config({}, no_env);
  BOOST_REQUIRE(plain);
  BOOST_CHECK_EQUAL(plain->server.transfer_dir, "data/temp/lbp");
  // An explicit server.transfer_dir stays.
  config_file g{R"({"server": {"transfer_dir": "/t"}, "box": {"local": {"host_root": "/srv/box"}}})"};
  auto e = boxrt::load_boxd_config({"--config", g.path.string()}, no_env);
  BOOST_REQUIRE(e);
  BOOST_CHECK_EQUAL(e->server.transfer_dir, "/t");
}

BOOST_AUTO_TEST_CASE(help_version_and_check_config_are_commands) {
  auto h = boxrt::load_boxd_config({"--help"}, no_env);
  BOOST_REQUIRE(h);
  BOOST_CHECK(h->command == boxrt::boxd_command::help);
  auto v = boxrt::load_boxd_config({"--version"}, no_env);
  BOOST_REQUIRE(v);
  BOOST_CHECK(v->command == boxrt::boxd_command::version);
  config_file f{R"({"server": {}})"};
  auto c = boxrt::load_boxd_config({"--check-config", f.path.string()}, no_env);
  BOOST_REQUIRE(c);
  BOOST_CHECK(c->command == boxrt::boxd_command::check_config);
  BOOST_CHECK_EQUAL(c->config_file, f.path.string());
  auto bad = boxrt::load_boxd_config({"--helpme"}, no_env);
  BOOST_REQUIRE(!bad);
  BOOST_CHECK(bad.error().message.find("boxd --help") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// A whole config file's `cluster` block, with a real self-signed certificate (its own
/// CA) by default, and a file that only looks like one.
struct cluster_files {
  cluster_files() {
    auto made = std::system(("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=n1 -keyout " + key.string()
                             + " -out " + cert.string() + " >/dev/null 2>&1")
                              .c_str());
    BOOST_REQUIRE_MESSAGE(made == 0, "openssl could not make a test certificate");
    fs::copy_file(cert, ca, fs::copy_options::overwrite_existing);
    std::ofstream{fake} << "pem";
  }
  ~cluster_files() {
    for (auto* p : {&cert, &key, &ca, &fake})
      fs::remove(*p);
  }
  std::string tls() const {
    return R"({"certificate": ")" + cert.string() + R"(", "key": ")" + key.string() + R"(", "ca_file": ")"
           + ca.string() + R"("})";
  }
  std::string block(const std::string& extra = {}, const std::string& tls_json = {}) const {
    return R"({"node_id": "n1", "listen": "127.0.0.1:7101", "etcd": {"endpoints": ["http://127.0.0.1:2379"],)"
           R"( "prefix": "/boxrt/c1"}, "uid_range": [1879048192, 1879113727], "tls": )"
           + (tls_json.empty() ? tls() : tls_json) + extra + "}";
  }
  fs::path dir = fs::temp_directory_path();
  fs::path cert = dir / ("boxd-cluster-cert-" + std::to_string(::getpid()));
  fs::path key = dir / ("boxd-cluster-key-" + std::to_string(::getpid()));
  fs::path ca = dir / ("boxd-cluster-ca-" + std::to_string(::getpid()));
  fs::path fake = dir / ("boxd-cluster-fake-" + std::to_string(::getpid()));
};

boxrt::result<boxrt::boxd_config> load_cluster(const std::string& block) {
  config_file f{R"({"cluster": )" + block + "}"};
  return boxrt::load_boxd_config({"--config", f.path.string()}, no_env);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_cluster_block_is_read_and_its_uid_range_replaces_the_servers) {
  BOOST_CHECK(!boxrt::default_boxd_config().cluster.enabled);
  cluster_files files;
  auto c = load_cluster(files.block(R"(, "lease_ms": 1500, "takeover_wait_ms": 2000)"));
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
  BOOST_CHECK(c->cluster.enabled);
  BOOST_CHECK_EQUAL(c->cluster.node_id, "n1");
  BOOST_CHECK_EQUAL(c->cluster.listen_port, 7101);
  BOOST_CHECK_EQUAL(c->cluster.advertise_host, "127.0.0.1"); // advertise defaults to listen
  BOOST_CHECK_EQUAL(c->cluster.etcd_prefix, "/boxrt/c1");
  BOOST_CHECK_EQUAL(c->cluster.lease_ms, 1500);
  BOOST_CHECK_EQUAL(c->cluster.takeover_wait_ms, 2000);
  BOOST_CHECK_EQUAL(c->server.sandbox_uid_first, 1879048192u);
  BOOST_CHECK_EQUAL(c->server.sandbox_uid_last, 1879113727u);
}

BOOST_AUTO_TEST_CASE(a_bad_cluster_block_is_a_validation_error_naming_its_key) {
  cluster_files files;
  const std::pair<std::string, std::string> cases[] = {
    {files.block({}, "null"), "cluster.tls is required"},
    {files.block({}, R"({"certificate": ")" + files.cert.string() + R"("})"), "cluster.tls.key is required"},
    {files.block({}, R"({"certificate": "/nonexistent/c", "key": "/nonexistent/k", "ca_file": "/nonexistent/a"})"),
     "cluster.tls.certificate /nonexistent/c cannot be read"},
    {files.block({}, R"({"certificate": ")" + files.fake.string() + R"(", "key": ")" + files.key.string()
                       + R"(", "ca_file": ")" + files.ca.string() + R"("})"),
     "cluster.tls.certificate " + files.fake.string() + " is not a PEM certificate chain"},
    {files.block({}, R"({"certificate": ")" + files.cert.string() + R"(", "key": ")" + files.key.string()
                       + R"(", "ca_file": ")" + files.fake.string() + R"("})"),
     "cluster.tls.ca_file " + files.fake.string() + " holds no PEM CA certificate"},
    {files.block(R"(, "lease_ms": 100)"), "cluster.lease_ms must be between 500 and 60000"},
    {files.block(R"(, "takeover_wait_ms": true)"), "cluster.takeover_wait_ms must be an integer"},
    {files.block(R"(, "advertise": "nohost")"), "cluster.advertise must be HOST:PORT"},
    {files.block(R"(, "color": "blue")"), "unknown key cluster.color"},
    {R"({"listen": "127.0.0.1:7101"})", "cluster.node_id is required"},
  };
  for (const auto& [block, message] : cases) {
    BOOST_TEST_CONTEXT(block) {
      auto r = load_cluster(block);
      BOOST_REQUIRE(!r);
      BOOST_CHECK(r.error().code == boxrt::ec::validation);
      BOOST_CHECK_MESSAGE(r.error().message.find(message) != std::string::npos, r.error().message);
    }
  }
  auto bad_id = load_cluster(R"({"node_id": "n 1", "listen": "127.0.0.1:7101"})");
  BOOST_REQUIRE(!bad_id);
  BOOST_CHECK(bad_id.error().message.find("cluster.node_id must be") != std::string::npos);
}
