#include "backends/linux/cgroup.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <spdlog/spdlog.h>

namespace boxrt {

namespace fs = std::filesystem;

namespace {

constexpr const char* controllers[] = {"memory", "pids", "cpu"};

box_error write_file(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_CREAT, 0644);
  if (fd < 0)
    return make_box_error(ec::box_error, "cannot open " + path + ": " + std::strerror(errno));
  auto n = ::write(fd, value.data(), value.size());
  int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size()))
    return make_box_error(ec::box_error, "cannot write " + path + ": " + std::strerror(e));
  return {};
}

std::vector<pid_t> procs_of(const std::string& dir) {
  std::vector<pid_t> out;
  std::ifstream in{dir + "/cgroup.procs"};
  pid_t p;
  while (in >> p)
    out.push_back(p);
  return out;
}

void kill_dir(const std::string& dir) {
  // Processes may fork while we kill: repeat until the group is empty (bounded).
  for (int round = 0; round < 200; ++round) {
    auto pids = procs_of(dir);
    if (pids.empty())
      return;
    for (auto p : pids)
      ::kill(p, SIGKILL);
    ::usleep(round < 10 ? 1000 : 10000);
  }
  spdlog::warn("cgroup: processes in {} survived SIGKILL", dir);
}

/// rmdir fails with EBUSY while killed processes are still exiting: retry briefly.
void remove_dir(const std::string& dir) {
  for (int round = 0; round < 200; ++round) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT)
      return;
    if (errno != EBUSY) {
      spdlog::warn("cgroup: cannot remove {}: {}", dir, std::strerror(errno));
      return;
    }
    kill_dir(dir);
    ::usleep(round < 10 ? 1000 : 10000);
  }
  spdlog::warn("cgroup: {} stayed busy", dir);
}

} // namespace

cgroup_tree::cgroup_tree(std::string root, std::string base, version v)
  : root_(std::move(root)), base_(std::move(base)), version_(v) {
}

cgroup_tree::version cgroup_tree::detect(const std::string& root) {
  std::ifstream in{root + "/cgroup.controllers"};
  std::string c;
  int found = 0;
  while (in >> c)
    found += (c == "memory" || c == "pids" || c == "cpu") ? 1 : 0;
  return found == 3 ? version::v2 : version::v1;
}

std::string cgroup_tree::controller_dir(const char* controller) const {
  if (version_ == version::v2)
    return root_ + "/" + base_;
  return root_ + "/" + controller + "/" + base_;
}

std::vector<std::string> cgroup_tree::base_dirs() const {
  if (version_ == version::v2)
    return {root_ + "/" + base_};
  std::vector<std::string> out;
  for (auto* c : controllers)
    out.push_back(controller_dir(c));
  out.push_back(controller_dir("blkio"));
  out.push_back(controller_dir("cpuacct"));
  return out;
}

bool cgroup_tree::usable(std::string* why) const {
  auto probe = create("probe-" + std::to_string(::getpid()),
                      cgroup_limits{64 << 20, 16, 0.5});
  if (!probe) {
    if (why)
      *why = probe.error().message;
    return false;
  }
  (*probe)->destroy();
  return true;
}

result<std::unique_ptr<cgroup_tree::group>> cgroup_tree::create(const std::string& name,
                                                            const cgroup_limits& limits) const {
  std::unique_ptr<group> g{new group()};
  g->name_ = name;
  g->v2_ = version_ == version::v2;
  std::error_code err;
  if (g->v2_) {
    // The base delegates the three controllers to its children.
    auto base = root_ + "/" + base_;
    fs::create_directories(base, err);
    if (err)
      return make_box_error(ec::box_error, "cannot create cgroup " + base + ": " + err.message());
    if (auto e = write_file(base + "/cgroup.subtree_control", limits.io ? "+memory +pids +cpu +io" : "+memory +pids +cpu"))
      return e;
    auto dir = base + "/" + name;
    fs::create_directories(dir, err);
    if (err)
      return make_box_error(ec::box_error, "cannot create cgroup " + dir + ": " + err.message());
    g->dirs_.push_back(dir);
    g->memory_dir_ = g->pids_dir_ = g->cpuacct_dir_ = dir;
    if (limits.io)
      g->io_dir_ = dir;
  } else {
    for (auto* c : controllers) {
      if (!fs::is_directory(root_ + "/" + c))
        return make_box_error(ec::box_error, std::string{"cgroup v1 controller "} + c + " is not mounted");
      auto dir = controller_dir(c) + "/" + name;
      fs::create_directories(dir, err);
      if (err)
        return make_box_error(ec::box_error, "cannot create cgroup " + dir + ": " + err.message());
      g->dirs_.push_back(dir);
    }
    g->memory_dir_ = g->dirs_[0];
    g->pids_dir_ = g->dirs_[1];
    // CPU accounting: in the cpu group when cpu and cpuacct share a hierarchy, else in
    // a cpuacct group of its own (optional: only box_status reads it).
    if (fs::exists(g->dirs_[2] + "/cpuacct.usage")) {
      g->cpuacct_dir_ = g->dirs_[2];
    } else if (fs::exists(root_ + "/cpuacct/cpuacct.usage")) {
      auto dir = controller_dir("cpuacct") + "/" + name;
      fs::create_directories(dir, err);
      if (!err) {
        g->dirs_.push_back(dir);
        g->cpuacct_dir_ = dir;
      }
    }
    if (limits.io) {
      if (!fs::is_directory(root_ + "/blkio"))
        return make_box_error(ec::box_error, "cgroup v1 controller blkio is not mounted");
      auto dir = controller_dir("blkio") + "/" + name;
      fs::create_directories(dir, err);
      if (err)
        return make_box_error(ec::box_error, "cannot create cgroup " + dir + ": " + err.message());
      g->dirs_.push_back(dir);
      g->io_dir_ = dir;
    }
  }
  auto fail = [&](box_error e) -> result<std::unique_ptr<group>> {
    g->destroy();
    return e;
  };
  auto cpu_dir = g->v2_ ? g->dirs_[0] : g->dirs_[2];
  auto quota = static_cast<int64_t>(std::llround(limits.cpus * 100000.0));
  quota = std::max<int64_t>(quota, 1000);
  if (g->v2_) {
    if (limits.memory_bytes > 0) {
      if (auto e = write_file(g->memory_dir_ + "/memory.max", std::to_string(limits.memory_bytes)))
        return fail(e);
      if (fs::exists(g->memory_dir_ + "/memory.swap.max"))
        (void)write_file(g->memory_dir_ + "/memory.swap.max", "0");
    }
    if (limits.pids > 0)
      if (auto e = write_file(g->pids_dir_ + "/pids.max", std::to_string(limits.pids)))
        return fail(e);
    if (limits.cpus > 0)
      if (auto e = write_file(cpu_dir + "/cpu.max", std::to_string(quota) + " 100000"))
        return fail(e);
  } else {
    if (limits.memory_bytes > 0) {
      if (auto e = write_file(g->memory_dir_ + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes)))
        return fail(e);
      // No swap either, where swap accounting exists (limit must be >= memory limit).
      if (fs::exists(g->memory_dir_ + "/memory.memsw.limit_in_bytes"))
        (void)write_file(g->memory_dir_ + "/memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes));
    }
    if (limits.pids > 0)
      if (auto e = write_file(g->pids_dir_ + "/pids.max", std::to_string(limits.pids)))
        return fail(e);
    if (limits.cpus > 0) {
      if (auto e = write_file(cpu_dir + "/cpu.cfs_period_us", "100000"))
        return fail(e);
      if (auto e = write_file(cpu_dir + "/cpu.cfs_quota_us", std::to_string(quota)))
        return fail(e);
    }
  }
  for (auto& d : g->dirs_) {
    int fd = ::open((d + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC | O_CREAT, 0644);
    if (fd < 0)
      return fail(make_box_error(ec::box_error, "cannot open " + d + "/cgroup.procs: " + std::strerror(errno)));
    g->join_fds_.push_back(fd);
  }
  return g;
}

void cgroup_tree::remove_all() const {
  for (auto& base : base_dirs()) {
    std::error_code err;
    if (!fs::is_directory(base, err))
      continue;
    for (auto& entry : fs::directory_iterator{base, err}) {
      if (!entry.is_directory())
        continue;
      kill_dir(entry.path().string());
      remove_dir(entry.path().string());
    }
    ::rmdir(base.c_str());
  }
}

void cgroup_tree::remove_base() const {
  for (auto& base : base_dirs())
    ::rmdir(base.c_str()); // only when empty: live groups keep it
}

cgroup_tree::group::~group() {
  destroy();
}

void cgroup_tree::group::close_join_fds() {
  for (int fd : join_fds_)
    ::close(fd);
  join_fds_.clear();
}

int64_t cgroup_tree::group::oom_kills() const {
  std::ifstream in{memory_dir_ + (v2_ ? "/memory.events" : "/memory.oom_control")};
  std::string key;
  int64_t value = 0;
  while (in >> key >> value)
    if (key == "oom_kill")
      return value;
  return 0;
}

int64_t cgroup_tree::group::cpu_usec() const {
  if (cpuacct_dir_.empty())
    return -1;
  if (v2_) {
    std::ifstream in{cpuacct_dir_ + "/cpu.stat"};
    std::string key;
    int64_t value = 0;
    while (in >> key >> value)
      if (key == "usage_usec")
        return value;
    return -1;
  }
  std::ifstream in{cpuacct_dir_ + "/cpuacct.usage"};
  int64_t ns = 0;
  if (in >> ns)
    return ns / 1000;
  return -1;
}

int64_t cgroup_tree::group::memory_bytes() const {
  std::ifstream in{memory_dir_ + (v2_ ? "/memory.current" : "/memory.usage_in_bytes")};
  int64_t bytes = 0;
  if (in >> bytes)
    return bytes;
  return -1;
}

box_error cgroup_tree::group::limit_io(unsigned major, unsigned minor, const io_caps& caps) const {
  if (io_dir_.empty())
    return make_box_error(ec::box_error, "cgroup " + name_ + " has no io controller");
  auto dev = std::to_string(major) + ":" + std::to_string(minor);
  if (v2_) {
    auto v = [](int64_t x) { return x > 0 ? std::to_string(x) : std::string{"max"}; };
    return write_file(io_dir_ + "/io.max", dev + " rbps=" + v(caps.read_bps) + " wbps=" + v(caps.write_bps)
                                             + " riops=" + v(caps.read_iops) + " wiops=" + v(caps.write_iops));
  }
  const std::pair<const char*, int64_t> files[] = {{"read_bps_device", caps.read_bps},
                                                   {"write_bps_device", caps.write_bps},
                                                   {"read_iops_device", caps.read_iops},
                                                   {"write_iops_device", caps.write_iops}};
  for (auto& [file, value] : files)
    if (value > 0)
      if (auto e = write_file(io_dir_ + "/blkio.throttle." + file, dev + " " + std::to_string(value)))
        return e;
  return {};
}

std::string cgroup_tree::group::io_limits() const {
  if (io_dir_.empty())
    return {};
  auto slurp = [](const std::string& path) {
    std::ifstream in{path};
    return std::string{std::istreambuf_iterator<char>{in}, {}};
  };
  if (v2_)
    return slurp(io_dir_ + "/io.max");
  std::map<std::string, std::string> by_device;
  for (const char* key : {"read_bps", "write_bps", "read_iops", "write_iops"}) {
    std::istringstream in{slurp(io_dir_ + "/blkio.throttle." + key + "_device")};
    std::string dev, value;
    while (in >> dev >> value)
      by_device[dev] += std::string{by_device[dev].empty() ? "" : " "} + key + "=" + value;
  }
  std::string out;
  for (auto& [dev, line] : by_device)
    out += dev + " " + line + "\n";
  return out;
}

void cgroup_tree::group::kill_all() const {
  if (!pids_dir_.empty())
    kill_dir(pids_dir_);
}

void cgroup_tree::group::signal_all() const {
  if (!pids_dir_.empty())
    for (auto p : procs_of(pids_dir_))
      ::kill(p, SIGKILL);
}

size_t cgroup_tree::group::process_count() const {
  return pids_dir_.empty() ? 0 : procs_of(pids_dir_).size();
}

std::string cgroup_tree::group::pids_max() const {
  std::ifstream in{pids_dir_ + "/pids.max"};
  std::string v;
  in >> v;
  return v;
}

void cgroup_tree::group::destroy() {
  if (destroyed_)
    return;
  destroyed_ = true;
  close_join_fds();
  kill_all();
  for (auto& d : dirs_)
    remove_dir(d);
}

} // namespace boxrt
