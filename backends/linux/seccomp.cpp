// Builds the filter with libseccomp and exports it through a memfd; the bytes are kept
// in a function-local static, so the work runs once and concurrent first calls wait.
#include "backends/linux/seccomp.hpp"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/sockios.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

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
  // Per-process segment descriptors: a 16-bit-code surface with a history of kernel
  // bugs that no 64-bit command needs.
  "modify_ldt",
  // Reaching into another process of the same uid (boxrt-init above all): its
  // descriptors, its identity, and signals by descriptor (a pidfd or a /proc/<pid>
  // directory, which the pid rules below cannot see).
  "pidfd_getfd",     "kcmp",           "pidfd_send_signal", "process_madvise",
  // Interfaces that bypass this filter or the namespaces: io_uring runs file and socket
  // operations the filter never sees; memfd_secret hides memory from the host.
  "io_uring_setup",  "io_uring_enter", "io_uring_register", "memfd_secret",
});

/// Syscalls added to the kernel after libseccomp 2.5.4 learned its tables, by number.
struct raw_syscall {
  const char* name;
  int number;
};
constexpr raw_syscall late_syscalls[] = {
  {"fchmodat2", 452}, // the same number on x86_64 and the asm-generic architectures
};

/// Processes of the sandbox that its commands must not signal: pid 1 (boxrt-init's
/// reaper, which leads the sandbox's session and process group) and pid 2 (the serving
/// boxrt-init, in that group), the same layout on both drivers. As pids, as process groups (negative; -1 is also every process the caller
/// may signal) and as owners of F_SETOWN.
constexpr int protected_pids[] = {1, 2};
constexpr uint32_t as_u32(int v) { return static_cast<uint32_t>(v); }

/// Argument `arg` equals `value` in its low 32 bits. An int argument arrives in a 64-bit
/// register whose upper half the kernel ignores and a caller may fill as it likes
/// (sign-extended or not): an exact 64-bit comparison would let -1 slip through as
/// 0x00000000ffffffff.
constexpr scmp_arg_cmp low32_eq(unsigned int arg, uint32_t value) {
  return scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, 0xffffffffull, value};
}

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

/// The syscall number of `name` here, or -1 when this architecture has none.
int resolve(const char* name) {
  if (auto nr = seccomp_syscall_resolve_name(name); nr >= 0)
    return nr;
#if defined(__x86_64__) || defined(__aarch64__) || defined(__riscv)
  for (const auto& s : late_syscalls)
    if (std::string_view{s.name} == name)
      return s.number;
#endif
  return -1;
}

/// Adds one rule; "" on success, else the message.
std::string add(scmp_filter_ctx ctx, int errno_value, const char* name,
                std::initializer_list<scmp_arg_cmp> args) {
  auto nr = resolve(name);
  if (nr < 0)
    return {}; // not a syscall of this architecture
  auto rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(errno_value), nr,
                                   static_cast<unsigned int>(args.size()), std::data(args));
  return rc < 0 ? rc_text((std::string{"rule for "} + name).c_str(), rc) : std::string{};
}

/// Rules that look at arguments. Several rules for one syscall are alternatives.
std::string add_argument_rules(scmp_filter_ctx ctx) {
  std::string err;
  auto rule = [&](int e, const char* name, std::initializer_list<scmp_arg_cmp> args) {
    if (err.empty())
      err = add(ctx, e, name, args);
  };
  // Signals aimed at the sandbox's own init. pid_t arguments are ints: only the low 32
  // bits count, whatever the caller left in the upper half of the register.
  std::vector<uint32_t> targets{as_u32(-1)};
  for (int p : protected_pids) {
    targets.push_back(as_u32(p));
    targets.push_back(as_u32(-p));
  }
  for (auto t : targets) {
    rule(EPERM, "kill", {low32_eq(0, t)});
    rule(EPERM, "rt_sigqueueinfo", {low32_eq(0, t)});
    // F_SETOWN makes the kernel signal the owner when I/O is possible (F_SETSIG picks
    // the signal): a signal by proxy.
    rule(EPERM, "fcntl", {low32_eq(1, F_SETOWN), low32_eq(2, t)});
  }
  for (int p : protected_pids) {
    // Joining init's process group (kill(0, ...) would then reach it), or changing its
    // limits, priority or scheduling.
    rule(EPERM, "setpgid", {low32_eq(1, as_u32(p))});
    rule(EPERM, "prlimit64", {low32_eq(0, as_u32(p))});
    rule(EPERM, "setpriority", {low32_eq(0, PRIO_PROCESS), low32_eq(1, as_u32(p))});
    rule(EPERM, "setpriority", {low32_eq(0, PRIO_PGRP), low32_eq(1, as_u32(p))});
    rule(EPERM, "ioprio_set", {low32_eq(0, 1 /* IOPRIO_WHO_PROCESS */), low32_eq(1, as_u32(p))});
    rule(EPERM, "ioprio_set", {low32_eq(0, 2 /* IOPRIO_WHO_PGRP */), low32_eq(1, as_u32(p))});
    for (const char* sched : {"sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity"})
      rule(EPERM, sched, {low32_eq(0, as_u32(p))});
    rule(EPERM, "tkill", {low32_eq(0, as_u32(p))});
    rule(EPERM, "tgkill", {low32_eq(0, as_u32(p))});
    rule(EPERM, "tgkill", {low32_eq(1, as_u32(p))});
    rule(EPERM, "rt_tgsigqueueinfo", {low32_eq(0, as_u32(p))});
    rule(EPERM, "rt_tgsigqueueinfo", {low32_eq(1, as_u32(p))});
    rule(EPERM, "pidfd_open", {low32_eq(0, as_u32(p))});
  }
  // The owner behind a pointer (F_SETOWN_EX, FIOSETOWN, SIOCSPGRP) cannot be checked.
  rule(EPERM, "fcntl", {low32_eq(1, F_SETOWN_EX)});
  rule(EPERM, "ioctl", {low32_eq(1, FIOSETOWN)});
  rule(EPERM, "ioctl", {low32_eq(1, SIOCSPGRP)});
  // vsock reaches the hypervisor and other guests: a network namespace does not
  // isolate it.
  rule(EAFNOSUPPORT, "socket", {low32_eq(0, AF_VSOCK)});
  rule(EAFNOSUPPORT, "socketpair", {low32_eq(0, AF_VSOCK)});
  // Netlink: only NETLINK_ROUTE (ip) and NETLINK_SOCK_DIAG (ss). The protocol is an int,
  // so any 64-bit value above NETLINK_SOCK_DIAG covers every low half above it (and a
  // negative one), and 1-3 are refused one by one.
  static_assert(NETLINK_ROUTE == 0 && NETLINK_SOCK_DIAG == 4);
  rule(EPROTONOSUPPORT, "socket",
       {low32_eq(0, AF_NETLINK), scmp_arg_cmp{2, SCMP_CMP_GT, NETLINK_SOCK_DIAG, 0}});
  for (uint32_t proto = NETLINK_ROUTE + 1; proto < NETLINK_SOCK_DIAG; ++proto)
    rule(EPROTONOSUPPORT, "socket", {low32_eq(0, AF_NETLINK), low32_eq(2, proto)});
  // No set-uid or set-gid file, ever: such a file would lend the workspace's uid (or
  // the host group) to any local user who can run it.
  for (uint32_t bit : {uint32_t{S_ISUID}, uint32_t{S_ISGID}}) {
    const auto mode_has = [bit](unsigned int arg) { return scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, bit, bit}; };
    rule(EPERM, "chmod", {mode_has(1)});
    rule(EPERM, "fchmod", {mode_has(1)});
    rule(EPERM, "fchmodat", {mode_has(2)});
    rule(EPERM, "fchmodat2", {mode_has(2)});
    rule(EPERM, "creat", {mode_has(1)});
    rule(EPERM, "mknod", {mode_has(1)});
    rule(EPERM, "mknodat", {mode_has(2)});
    // The mode of open counts only when it creates (O_CREAT or O_TMPFILE).
    for (uint32_t creating : {uint32_t{O_CREAT}, uint32_t{__O_TMPFILE}}) {
      rule(EPERM, "open", {scmp_arg_cmp{1, SCMP_CMP_MASKED_EQ, creating, creating}, mode_has(2)});
      rule(EPERM, "openat", {scmp_arg_cmp{2, SCMP_CMP_MASKED_EQ, creating, creating}, mode_has(3)});
    }
  }
  // openat2 carries its flags and mode behind a pointer: ENOSYS makes callers fall back
  // to openat, whose arguments the rules above can see.
  rule(ENOSYS, "openat2", {});
  return err;
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
    auto nr = resolve(text.c_str());
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
  if (auto err = add_argument_rules(filter.ctx); !err.empty()) {
    out.error = std::move(err);
    return out;
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
