// select_backend: which names yield which backend, and why none when none.
#include "backends/registry.hpp"

#include <boost/test/unit_test.hpp>

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
}

BOOST_AUTO_TEST_CASE(default_auto_and_local_mean_bwrap_which_is_not_built_yet) {
  for (auto name : {"", "auto", "local", "bwrap"}) {
    auto choice = select(name);
    BOOST_TEST(choice.backend == nullptr, name);
    BOOST_TEST(choice.name == "bwrap", name);
    BOOST_TEST(choice.reason == "bubblewrap backend is not available in this build", name);
  }
}

BOOST_AUTO_TEST_CASE(nsjail_and_process_are_reported_under_their_own_names) {
  auto nsjail = select("nsjail");
  BOOST_TEST(nsjail.backend == nullptr);
  BOOST_TEST(nsjail.name == "nsjail");
  BOOST_TEST(nsjail.reason == "nsjail backend is not available in this build");
  auto process = select("process");
  BOOST_TEST(process.backend == nullptr);
  BOOST_TEST(process.name == "process");
  BOOST_TEST(process.reason == "process backend is not available in this build");
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
