// The warm pool (box.limits.warm_pool) with real sandboxes on the suite's driver: a new
// workspace adopts a sandbox started ahead and gets it as its own (its uid recorded on
// its folder, its files, its skills per exec); a workspace that is not new, or does not
// fit the pool's shape, starts its own; adopted sandboxes stay apart from each other; the
// pool refills and leaves nothing behind when it stops.
#include "backends/sandbox/sandbox.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "sandbox_fixture.hpp"

using namespace boxrt;
namespace fs = std::filesystem;

namespace {

using testing::sandbox_precondition;
using namespace std::chrono_literals;

struct pool_fixture : testing::sandbox_fixture {
  explicit pool_fixture(int size = 1) {
    opts.warm_pool = size;
    make_backend();
    backend->cleanup_orphans(); // as boxd does at start: the pool fills from here
    BOOST_REQUIRE_MESSAGE(backend->wait_pool_ready(static_cast<size_t>(size), 30s), "the warm pool never filled");
  }
  ~pool_fixture() {
    // A backend without a pool for the base fixture's cleanup.
    opts.warm_pool = 0;
    make_backend();
  }

  uint32_t owner(const std::string& path) const {
    struct stat st{};
    BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
    return st.st_uid;
  }
};

struct pool_of_two : pool_fixture {
  pool_of_two() : pool_fixture(2) {}
};

/// SIGKILLs process `pid` and waits (bounded) until it has exited.
bool kill_and_wait(pid_t pid) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0 || ::kill(pid, SIGKILL) != 0)
    return false;
  pollfd p{fd, POLLIN, 0};
  bool gone = ::poll(&p, 1, 20000) == 1;
  ::close(fd);
  return gone;
}

/// Mount points at or below `dir` in boxd's (this process's) mount namespace.
size_t mounts_below(const std::string& dir) {
  std::ifstream in{"/proc/self/mountinfo"};
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields{line};
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    n += point == dir || point.starts_with(dir + "/");
  }
  return n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(warm_pool, *boost::unit_test::precondition(sandbox_precondition))

BOOST_FIXTURE_TEST_CASE(a_new_workspace_adopts_a_warm_sandbox_as_its_own, pool_fixture) {
  auto path = tenant("a0a0a0a0a0a0a0a0a0a0a0a0");
  fs::create_directories(path);
  std::ofstream{path + "/hello"} << "from the host";
  auto s = spec("first", path);
  auto session = start(s);
  BOOST_TEST(backend->pool_status().adopted == 1u);
  // The workspace's own uid, recorded on its folder; its files, writable by it.
  auto uid = backend->sandbox_uid(*session);
  BOOST_TEST(uid >= opts.uid_first);
  BOOST_TEST(owner(path) == uid);
  auto r = run(*session, s, "id -u; cat /workspace/hello; echo; echo made > /workspace/out; pwd; ls -a /workspace");
  BOOST_TEST(r.exit_code == 0, r.stderr_text);
  BOOST_TEST(r.stdout_text.starts_with(std::to_string(uid) + "\nfrom the host\n/workspace\n"), r.stdout_text);
  BOOST_TEST(r.stdout_text.find(".skills") != std::string::npos);
  BOOST_TEST(owner(path + "/out") == uid);
  // Skills come per exec through the view it took with the workspace.
  auto store = root + "/skills-store/alpha";
  fs::create_directories(store);
  std::ofstream{store + "/SKILL.md"} << "skill alpha";
  auto with = s;
  with.extra_mounts = {mount_spec{store, "/workspace/.skills/alpha", mount_mode::ro}};
  auto k = run(*session, with, "cat /workspace/.skills/alpha/SKILL.md; touch /workspace/.skills/alpha/x 2>&1");
  BOOST_TEST(k.stdout_text.find("skill alpha") != std::string::npos, k.stdout_text);
  BOOST_TEST(k.stdout_text.find("Read-only file system") != std::string::npos, k.stdout_text);
  BOOST_TEST(run(*session, s, "ls /workspace/.skills | wc -l").stdout_text == "0");
  // The pool refills behind it.
  BOOST_TEST(backend->wait_pool_ready(1, 30s));
  backend->stop_session(*session);
  BOOST_TEST(fs::exists(path + "/out"));
  // The workspace is not new any more: its next session starts its own sandbox, with the
  // same uid.
  auto again = start(s);
  BOOST_TEST(backend->pool_status().adopted == 1u);
  BOOST_TEST(backend->sandbox_uid(*again) == uid);
  BOOST_TEST(run(*again, s, "cat /workspace/out").stdout_text == "made");
  backend->stop_session(*again);
}

BOOST_FIXTURE_TEST_CASE(a_session_without_a_host_path_adopts_one_with_its_own_folder, pool_fixture) {
  // The warm sandbox's own folder is the workspace, with the session's own uid, as a
  // normal start would make it; skills still come per exec.
  auto s = spec("private");
  BOOST_TEST(backend->pool_fits(s));
  auto session = start(s);
  BOOST_TEST(backend->pool_status().adopted == 1u);
  auto r = run(*session, s, "id -u; echo kept > /workspace/f; cat /workspace/f; ls -a /workspace");
  BOOST_TEST(r.stdout_text.starts_with(std::to_string(backend->sandbox_uid(*session)) + "\nkept\n"), r.stdout_text);
  BOOST_TEST(r.stdout_text.find(".skills") != std::string::npos, r.stdout_text);
  auto store = root + "/skills-store/beta";
  fs::create_directories(store);
  std::ofstream{store + "/SKILL.md"} << "skill beta";
  auto with = s;
  with.extra_mounts = {mount_spec{store, "/workspace/.skills/beta", mount_mode::rw}};
  BOOST_TEST(run(*session, with, "cat /workspace/.skills/beta/SKILL.md; echo n > /workspace/.skills/beta/n")
               .stdout_text == "skill beta");
  BOOST_TEST(fs::exists(store + "/n"));
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(a_workspace_that_does_not_fit_the_pool_starts_its_own, pool_fixture) {
  auto base = spec("fit", tenant("b0b0b0b0b0b0b0b0b0b0b0b0"));
  BOOST_TEST(backend->pool_fits(base));
  auto net = base;
  net.network = network_mode::on;
  auto quota = base;
  quota.workspace_quota_mb = 8;
  auto memory = base;
  memory.memory_mb = 256;
  auto ro = base;
  ro.host_path_mode = mount_mode::ro;
  auto other_path = base;
  other_path.mount_path = "/work";
  for (auto* s : {&net, &quota, &memory, &ro, &other_path})
    BOOST_TEST(!backend->pool_fits(*s));
  // Started for real: its own sandbox, the warm one still waiting.
  memory.session_id = "memory";
  auto session = start(memory);
  BOOST_TEST(backend->pool_status().adopted == 0u);
  BOOST_TEST(backend->pool_status().ready == 1u);
  BOOST_TEST(run(*session, memory, "echo ok").stdout_text == "ok");
  backend->stop_session(*session);
  // A folder that already belongs to a uid of the range keeps it: no adoption.
  auto owned = tenant("c0c0c0c0c0c0c0c0c0c0c0c0");
  fs::create_directories(owned);
  const uint32_t mine = opts.uid_first + 4000;
  BOOST_REQUIRE(::chown(owned.c_str(), mine, mine) == 0);
  auto o = spec("owned", owned);
  auto kept = start(o);
  BOOST_TEST(backend->pool_status().adopted == 0u);
  BOOST_TEST(backend->sandbox_uid(*kept) == mine);
  backend->stop_session(*kept);
}

BOOST_FIXTURE_TEST_CASE(adopted_sandboxes_of_two_workspaces_stay_apart, pool_of_two) {
  // Two tenants, each in a sandbox the pool started: different uids, and a hostile one
  // that looks for the other's files, by host path and by search, finds nothing.
  auto pa = tenant("d0d0d0d0d0d0d0d0d0d0d0d0"), pb = tenant("d1d1d1d1d1d1d1d1d1d1d1d1");
  auto a = spec("a", pa), b = spec("b", pb);
  auto sa = start(a);
  auto sb = start(b);
  BOOST_TEST(backend->pool_status().adopted == 2u);
  BOOST_TEST(backend->sandbox_uid(*sa) != backend->sandbox_uid(*sb));
  BOOST_TEST(run(*sb, b, "echo secret > /workspace/b.txt && echo ok").stdout_text == "ok");
  auto hostile = run(*sa, a, "cat " + pb
                               + "/b.txt 2>&1; find / -name b.txt 2>/dev/null; echo done");
  BOOST_TEST(hostile.stdout_text.find("secret") == std::string::npos, hostile.stdout_text);
  BOOST_TEST(hostile.stdout_text.find("b.txt\n") == std::string::npos, hostile.stdout_text);
  // b's sandbox is untouched: the same one answers.
  BOOST_TEST(run(*sb, b, "cat /workspace/b.txt").stdout_text == "secret");
  backend->stop_session(*sa);
  backend->stop_session(*sb);
}

BOOST_FIXTURE_TEST_CASE(a_planted_skills_link_in_a_new_workspace_is_not_followed, pool_fixture) {
  // A new folder (no uid yet) whose .skills is a link to a host folder: adopting must not
  // mount the skills view there, nor hand the link's target over.
  auto path = tenant("e0e0e0e0e0e0e0e0e0e0e0e0");
  auto target = root + "/host-only";
  fs::create_directories(path);
  fs::create_directories(target);
  fs::create_symlink(target, path + "/.skills");
  auto s = spec("linked", path);
  auto r = backend->start_session(s);
  BOOST_TEST(backend->pool_status().adopted == 0u);
  BOOST_TEST(owner(target) == 0u);
  BOOST_TEST(fs::is_symlink(path + "/.skills"));
  if (r.ok())
    backend->stop_session(**r);
}

BOOST_FIXTURE_TEST_CASE(nothing_mounted_inside_an_adopted_sandbox_reaches_a_shared_host_mount, pool_fixture) {
  // The tenants' folder on a shared mount, as systemd makes /: what goes onto the
  // adopted workspace inside the sandbox (the skills view, skills per exec) must not
  // propagate back to the host.
  auto tenants = root + "/workspaces/tenants";
  fs::create_directories(tenants);
  BOOST_REQUIRE(::mount(tenants.c_str(), tenants.c_str(), nullptr, MS_BIND, nullptr) == 0);
  struct unbind {
    std::string dir;
    ~unbind() { ::umount2(dir.c_str(), MNT_DETACH); }
  } guard{tenants};
  BOOST_REQUIRE(::mount(nullptr, tenants.c_str(), nullptr, MS_SHARED, nullptr) == 0);
  auto path = tenant("f0f0f0f0f0f0f0f0f0f0f0f0");
  auto s = spec("shared", path);
  auto session = start(s);
  BOOST_TEST(backend->pool_status().adopted == 1u);
  auto store = root + "/skills-store/gamma";
  fs::create_directories(store);
  std::ofstream{store + "/SKILL.md"} << "skill gamma";
  auto with = s;
  with.extra_mounts = {mount_spec{store, "/workspace/.skills/gamma", mount_mode::rw}};
  BOOST_TEST(run(*session, with, "cat /workspace/.skills/gamma/SKILL.md").stdout_text == "skill gamma");
  BOOST_TEST(mounts_below(path) == 0u);
  backend->stop_session(*session);
  BOOST_TEST(mounts_below(path) == 0u);
  BOOST_TEST(fs::is_empty(path + "/.skills"));
}

BOOST_FIXTURE_TEST_CASE(an_adopted_sandbox_that_dies_is_replaced_with_its_workspace, pool_fixture) {
  auto path = tenant("a1a1a1a1a1a1a1a1a1a1a1a1");
  auto s = spec("dies", path);
  auto session = start(s);
  BOOST_TEST(backend->pool_status().adopted == 1u);
  auto uid = backend->sandbox_uid(*session);
  BOOST_REQUIRE(run(*session, s, "echo kept > /workspace/f").exit_code == 0);
  auto first = backend->sandbox_pid(*session);
  BOOST_REQUIRE(kill_and_wait(first));
  // The next exec gets a sandbox made the normal way, with the same workspace, uid and
  // skills view.
  auto store = root + "/skills-store/delta";
  fs::create_directories(store);
  std::ofstream{store + "/SKILL.md"} << "skill delta";
  auto with = s;
  with.extra_mounts = {mount_spec{store, "/workspace/.skills/delta", mount_mode::ro}};
  auto r = run(*session, with, "id -u; cat /workspace/f; cat /workspace/.skills/delta/SKILL.md");
  BOOST_TEST(r.stdout_text == std::to_string(uid) + "\nkept\nskill delta", r.stdout_text + r.stderr_text);
  BOOST_TEST(backend->sandbox_pid(*session) != first);
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(a_warm_sandbox_killed_while_it_waits_is_replaced, pool_fixture) {
  auto before = backend->pool_status().pids;
  BOOST_REQUIRE_EQUAL(before.size(), 1u);
  BOOST_REQUIRE(kill_and_wait(before.front()));
  BOOST_TEST(backend->wait_pool(
    [&](const warm_pool_status& st) { return st.ready == 1 && st.pids.front() != before.front(); }, 30s));
  auto s = spec("after-kill", tenant("a2a2a2a2a2a2a2a2a2a2a2a2"));
  auto session = start(s);
  BOOST_TEST(backend->pool_status().adopted == 1u);
  BOOST_TEST(run(*session, s, "echo alive").stdout_text == "alive");
  backend->stop_session(*session);
}

BOOST_FIXTURE_TEST_CASE(concurrent_first_uses_of_one_new_workspace_share_its_uid, pool_of_two) {
  auto path = tenant("a3a3a3a3a3a3a3a3a3a3a3a3");
  auto a = spec("one", path), b = spec("two", path);
  auto first = std::async(std::launch::async, [&] { return backend->start_session(a); });
  auto second = std::async(std::launch::async, [&] { return backend->start_session(b); });
  auto ra = first.get();
  auto rb = second.get();
  BOOST_REQUIRE(ra.ok());
  BOOST_REQUIRE(rb.ok());
  // One adopted at most; the other found the workspace taken and started its own.
  BOOST_TEST(backend->pool_status().adopted <= 1u);
  BOOST_TEST(backend->sandbox_uid(**ra) == backend->sandbox_uid(**rb));
  BOOST_TEST(owner(path) == backend->sandbox_uid(**ra));
  BOOST_TEST(run(**ra, a, "echo x > /workspace/x && echo ok").stdout_text == "ok");
  BOOST_TEST(run(**rb, b, "cat /workspace/x").stdout_text == "x");
  backend->stop_session(**ra);
  backend->stop_session(**rb);
}

BOOST_FIXTURE_TEST_CASE(after_a_restart_no_warm_sandbox_carries_a_host_path_workspaces_uid, pool_fixture) {
  // A new workspace on a host path outside the tenants folder adopts the warm sandbox:
  // its uid is the workspace's from then on, and only the uid record knows it.
  auto path = root + "/projects/alpha";
  auto s = spec("alpha", path);
  auto session = start(s);
  BOOST_TEST(backend->pool_status().adopted == 1u);
  const auto uid = backend->sandbox_uid(*session);
  BOOST_TEST(owner(path) == uid);
  BOOST_TEST(run(*session, s, "echo mine > /workspace/file").exit_code == 0);
  backend->stop_session(*session);
  session.reset();
  // A real restart: the pool goes with the backend, a new host state, and the clean-up
  // fills the pool again with the lowest free uid.
  make_backend();
  backend->cleanup_orphans();
  BOOST_REQUIRE_MESSAGE(backend->wait_pool_ready(1, 30s), "the warm pool never filled");
  auto plain = spec("plain");
  auto warm = start(plain);
  BOOST_TEST(backend->pool_status().adopted == 1u);
  BOOST_TEST(backend->sandbox_uid(*warm) != uid);
  // The workspace is not new: it starts its own sandbox, with its uid and its files.
  auto again = start(s);
  BOOST_TEST(backend->sandbox_uid(*again) == uid);
  BOOST_TEST(owner(path + "/file") == uid);
  backend->stop_session(*warm);
  backend->stop_session(*again);
}

BOOST_FIXTURE_TEST_CASE(a_stopped_pool_leaves_no_sandbox_behind, pool_of_two) {
  auto sessions = opts.state_dir + "/sessions";
  size_t warm = 0;
  for (auto& e : fs::directory_iterator{sessions})
    warm += e.path().filename().string().find("-warm-") != std::string::npos;
  BOOST_TEST(warm == 2u);
  opts.warm_pool = 0;
  make_backend(); // the pooled backend goes: its sandboxes with it
  warm = 0;
  for (auto& e : fs::directory_iterator{sessions})
    warm += e.path().filename().string().find("-warm-") != std::string::npos;
  BOOST_TEST(warm == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
