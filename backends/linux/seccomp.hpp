// The syscall filter boxrt loads into isolating sandboxes (bwrap --seccomp <fd>), built
// with libseccomp once per process (backends-and-skills.md "Feasibility", F1).
#pragma once

#include <string>
#include <vector>

#include "messages/error.hpp"

namespace boxrt {

/// The raw BPF program (an array of struct sock_filter, 8 bytes each) for the native
/// architecture: default allow; EPERM for the syscalls of seccomp_blocked_syscalls()
/// except clone3; EPERM for clone with any CLONE_NEW* bit in its flags; ENOSYS for
/// clone3, whose flags sit behind a pointer (glibc then falls back to clone). Syscalls
/// of other ABIs (i386, x32) kill the process, libseccomp's default for a foreign
/// architecture. Built on the first call; thread-safe; later calls return a copy.
result<std::string> seccomp_program();

/// Names of the syscalls the program refuses whatever their arguments (clone3
/// last), limited to those libseccomp knows on this architecture.
std::vector<std::string> seccomp_blocked_syscalls();

} // namespace boxrt
