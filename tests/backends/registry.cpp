// select_backend: which names yield which backend, and why none when none.
#include "backends/registry.hpp"

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>

using namespace boxrt;

namespace {

backend_choice select(std::string name) {
  box_config config;
  config.backend = std::move(name);
  return select_backend(config);
}

} // namespace

BOOST_AUTO_TEST_SUITE(registry_suite)

BOOST_AUTO_TEST_CASE(scripted_name_selects_the_scripted_backend_with_its_config) {
  box_config config;
  config.backend = "scripted";
  config.scripted = scripted_config{false, {"mount_isolation"}};
  auto choice = select_backend(config);
  BOOST_REQUIRE(choice.backend != nullptr);
  BOOST_TEST(choice.name == "scripted");
  BOOST_TEST(choice.reason == "");
  BOOST_TEST(choice.backend->name() == "scripted");
  auto report = choice.backend->probe_readiness("", false);
  BOOST_TEST(!report.available);
  BOOST_TEST(report.details.at("mount_isolation"));
}

BOOST_AUTO_TEST_CASE(surrounding_whitespace_in_the_name_is_ignored) {
  BOOST_TEST(select("  scripted \n").name == "scripted");
  // str.strip() removes Unicode spaces too (no-break space, ideographic space).
  BOOST_TEST(select("\xc2\xa0scripted\xe3\x80\x80").name == "scripted");
}

BOOST_AUTO_TEST_CASE(default_auto_and_local_mean_bwrap) {
  char tmpl[] = "/tmp/boxrt-registry-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  bool capable = ::geteuid() == 0 && ::access("/usr/bin/bwrap", X_OK) == 0;
  for (auto name : {"", "auto", "local", "bwrap"}) {
    box_config config;
    config.backend = name;
    config.local.host_root = root + "/" + (*name ? name : "default");
    auto choice = select_backend(config);
    BOOST_TEST(choice.name == "bwrap", name);
    if (capable) {
      BOOST_REQUIRE_MESSAGE(choice.backend != nullptr, choice.reason);
      BOOST_TEST(choice.backend->name() == "bwrap");
      BOOST_TEST(choice.backend->isolating());
    } else {
      // Without root or bubblewrap: no backend, a reason, and never a fallback.
      BOOST_TEST(choice.backend == nullptr, name);
      BOOST_TEST(choice.reason.rfind("bwrap backend unavailable: ", 0) == 0, name);
    }
  }
  std::error_code err;
  std::filesystem::remove_all(root, err);
}

BOOST_AUTO_TEST_CASE(nsjail_and_process_are_used_only_by_name) {
  char tmpl[] = "/tmp/boxrt-registry-XXXXXX";
  std::string root = ::mkdtemp(tmpl);
  box_config config;
  config.local.host_root = root;
  config.backend = "nsjail";
  auto nsjail = select_backend(config);
  BOOST_TEST(nsjail.name == "nsjail");
  if (::system("command -v nsjail >/dev/null 2>&1") != 0) {
    // Not packaged in Debian 12: reported under its own name, never replaced.
    BOOST_TEST(nsjail.backend == nullptr);
    BOOST_TEST(nsjail.reason.rfind("nsjail backend unavailable: nsjail is not available", 0) == 0);
  }
  config.backend = "process";
  auto process = select_backend(config);
  BOOST_REQUIRE(process.backend != nullptr);
  BOOST_TEST(process.name == "process");
  BOOST_TEST(!process.backend->isolating());
  // `auto` never picks the unisolated process backend.
  config.backend = "auto";
  auto automatic = select_backend(config);
  BOOST_TEST((automatic.backend == nullptr || automatic.backend->isolating()));
  automatic = {};
  std::error_code err;
  std::filesystem::remove_all(root, err);
}

BOOST_AUTO_TEST_CASE(unknown_name_selects_nothing_and_never_falls_back) {
  auto choice = select("docker");
  BOOST_TEST(choice.backend == nullptr);
  BOOST_TEST(choice.name == "docker");
  BOOST_TEST(choice.reason.starts_with("LangBot Box backend \"docker\" not found"));
}

BOOST_AUTO_TEST_CASE(unavailable_message_is_the_reference_text) {
  BOOST_TEST(backend_unavailable_message()
             == "LangBot Box backend unavailable. Install and start Docker or nsjail before "
                "using exec.");
}

BOOST_AUTO_TEST_SUITE_END()
