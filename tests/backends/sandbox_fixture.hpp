// A real isolating backend in a private temporary root, for the isolation regression
// tests (tests/backends/sandbox/isolation.cpp): every wall there is tried by a hostile program
// inside a real sandbox. Needs root and bubblewrap, as CI has; skipped elsewhere.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include "backends/sandbox/sandbox.hpp"

namespace boxrt::testing {

/// The driver these suites run on: BOXRT_TEST_DRIVER=nsjail (CTest's
/// test_backends_nsjail) or bwrap (the default). The same tests, so every wall is tried
/// on both.
inline sandbox_driver test_driver() {
  const char* d = std::getenv("BOXRT_TEST_DRIVER");
  return d != nullptr && std::string_view{d} == "nsjail" ? sandbox_driver::nsjail : sandbox_driver::bwrap;
}

/// nsjail as `make build` provides it, beside boxd (and boxrt-init) in the build folder.
inline std::string test_nsjail_path() {
  return std::filesystem::path{BOXRT_TEST_BUILD_DIR}.parent_path().string() + "/nsjail";
}

/// Options of a test backend on `driver` with its state under `root`.
inline void use_test_driver(sandbox_options& o) {
  o.driver = test_driver();
  if (o.driver == sandbox_driver::nsjail)
    o.nsjail_path = test_nsjail_path();
}

inline bool sandbox_capable() {
  if (::geteuid() != 0)
    return false;
  return test_driver() == sandbox_driver::nsjail ? ::access(test_nsjail_path().c_str(), X_OK) == 0
                                                 : ::access("/usr/bin/bwrap", X_OK) == 0;
}

inline boost::test_tools::assertion_result sandbox_precondition(boost::unit_test::test_unit_id) {
  return {sandbox_capable()};
}

struct sandbox_fixture {
  sandbox_fixture() {
    char tmpl[] = "/tmp/boxrt-isolation-XXXXXX";
    root = ::mkdtemp(tmpl);
    opts.state_dir = root + "/state";
    opts.skills_tenants_dir = root + "/skills/tenants";
    opts.skills_quota_mb = 8;
    use_test_driver(opts);
    make_backend();
  }
  ~sandbox_fixture() {
    backend->cleanup_orphans();
    backend.reset();
    std::error_code err;
    std::filesystem::remove_all(root, err);
  }

  void make_backend() {
    backend.reset();
    backend = std::make_unique<sandbox_backend>(opts);
    BOOST_REQUIRE_MESSAGE(backend->unavailable_reason().empty(), backend->unavailable_reason());
  }

  box_spec spec(std::string id, std::string host = {}) const {
    box_spec s;
    s.session_id = std::move(id);
    s.host_path = std::move(host);
    s.timeout_sec = 20;
    return s;
  }

  std::shared_ptr<backend_session> start(const box_spec& s) {
    auto r = backend->start_session(s);
    BOOST_REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string{} : r.error().message));
    return r.value();
  }

  exec_result run(backend_session& session, box_spec s, std::string cmd,
                  int64_t cap = exec_limits{}.max_output_bytes) {
    s.cmd = std::move(cmd);
    auto r = backend->exec(session, s, exec_limits{cap});
    BOOST_REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string{} : r.error().message));
    return r.value();
  }

  /// `tenants/ws-<hex24>` under the fixture's root, as a managed workspace path.
  std::string tenant(const std::string& hex24) const { return root + "/workspaces/tenants/ws-" + hex24; }

  std::string root;
  sandbox_options opts;
  std::unique_ptr<sandbox_backend> backend;
};

/// "name value" lines (a probe's report) as a map.
inline std::map<std::string, std::string> report_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);) {
    auto space = line.find(' ');
    if (space != std::string::npos)
      out[line.substr(0, space)] = line.substr(space + 1);
  }
  return out;
}

/// The shell text that runs `python` (a script) with python3 inside the sandbox.
inline std::string python_cmd(const std::string& python) {
  return "python3 - <<'BOXRT_PY'\n" + python + "\nBOXRT_PY";
}

} // namespace boxrt::testing
