// Builds the filter with libseccomp and exports it through a memfd; the bytes are kept
// in a function-local static, so the work runs once and concurrent first calls wait.
#include "backends/seccomp.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <sched.h>
#include <seccomp.h>
#include <string_view>
#include <sys/mman.h>
#include <unistd.h>

namespace boxrt {

namespace {

/// Refused with EPERM whatever their arguments: kernel, mount, namespace, keyring,
/// tracing and device-I/O interfaces a sandboxed command has no business calling.
constexpr auto eperm_syscalls = std::to_array<std::string_view>({
  "ptrace",          "mount",          "umount2",       "unshare",
  "setns",           "keyctl",         "add_key",       "request_key",
  "bpf",             "perf_event_open", "kexec_load",   "kexec_file_load",
  "init_module",     "finit_module",   "delete_module", "swapon",
  "swapoff",         "reboot",         "pivot_root",    "chroot",
  "open_by_handle_at", "name_to_handle_at", "userfaultfd", "fsopen",
  "fsmount",         "move_mount",     "open_tree",     "process_vm_readv",
  "process_vm_writev", "acct",         "quotactl",      "syslog",
  "iopl",            "ioperm",         "lookup_dcookie", "vhangup",
  "personality",
});

/// clone flags that create a namespace. CLONE_NEWTIME is left out: in clone(2) that
/// bit belongs to the exit-signal byte.
constexpr std::array<unsigned long, 7> namespace_flags{
  CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
  CLONE_NEWUSER, CLONE_NEWPID,   CLONE_NEWNET,
};

/// clone's flags are its first argument, except on s390 where they are the second.
#if defined(__s390__) || defined(__s390x__)
constexpr unsigned int clone_flags_arg = 1;
#else
constexpr unsigned int clone_flags_arg = 0;
#endif

struct built_filter {
  std::string program;
  std::string error;
  std::vector<std::string> blocked;
};

/// Frees the libseccomp context on every path.
struct filter_ctx {
  scmp_filter_ctx ctx = nullptr;
  ~filter_ctx() {
    if (ctx != nullptr)
      seccomp_release(ctx);
  }
};

std::string rc_text(const char* what, int rc) {
  return std::string{"seccomp filter: "} + what + " failed: " + std::strerror(-rc);
}

built_filter build() {
  built_filter out;
  filter_ctx filter{seccomp_init(SCMP_ACT_ALLOW)};
  if (filter.ctx == nullptr) {
    out.error = "seccomp filter: seccomp_init failed";
    return out;
  }
  for (auto name : eperm_syscalls) {
    std::string text{name};
    auto nr = seccomp_syscall_resolve_name(text.c_str());
    if (nr < 0)
      continue; // not a syscall of this architecture
    if (auto rc = seccomp_rule_add(filter.ctx, SCMP_ACT_ERRNO(EPERM), nr, 0); rc < 0) {
      out.error = rc_text(("rule for " + text).c_str(), rc);
      return out;
    }
    out.blocked.push_back(std::move(text));
  }
  // Several rules for one syscall are alternatives: any CLONE_NEW* bit refuses it.
  for (auto flag : namespace_flags) {
    scmp_arg_cmp has_flag{clone_flags_arg, SCMP_CMP_MASKED_EQ, flag, flag};
    auto rc = seccomp_rule_add(filter.ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, has_flag);
    if (rc < 0) {
      out.error = rc_text("rule for clone", rc);
      return out;
    }
  }
  if (auto nr = seccomp_syscall_resolve_name("clone3"); nr >= 0) {
    if (auto rc = seccomp_rule_add(filter.ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0); rc < 0) {
      out.error = rc_text("rule for clone3", rc);
      return out;
    }
    out.blocked.emplace_back("clone3");
  }
  auto fd = ::memfd_create("boxrt-seccomp", MFD_CLOEXEC);
  if (fd < 0) {
    out.error = std::string{"seccomp filter: memfd_create failed: "} + std::strerror(errno);
    return out;
  }
  std::string bytes;
  if (auto rc = seccomp_export_bpf(filter.ctx, fd); rc < 0) {
    out.error = rc_text("seccomp_export_bpf", rc);
  } else if (::lseek(fd, 0, SEEK_SET) < 0) {
    out.error = std::string{"seccomp filter: lseek failed: "} + std::strerror(errno);
  } else {
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0)
        bytes.append(buf, static_cast<size_t>(n));
    if (n < 0)
      out.error = std::string{"seccomp filter: read failed: "} + std::strerror(errno);
  }
  ::close(fd);
  if (out.error.empty() && (bytes.empty() || bytes.size() % 8 != 0))
    out.error = "seccomp filter: exported program has " + std::to_string(bytes.size()) + " bytes";
  if (out.error.empty())
    out.program = std::move(bytes);
  return out;
}

const built_filter& filter() {
  static const built_filter instance = build();
  return instance;
}

} // namespace

result<std::string> seccomp_program() {
  const auto& f = filter();
  if (!f.error.empty())
    return make_box_error(ec::box_error, f.error);
  return f.program;
}

std::vector<std::string> seccomp_blocked_syscalls() {
  return filter().blocked;
}

} // namespace boxrt
