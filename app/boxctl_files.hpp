// boxctl's file commands: ls, cat, rm, cp (app/boxctl_files.cpp, docs/files.md).
#pragma once

#include <string>
#include <vector>

#include "net/ws/client.hpp"

namespace boxrt::boxctl {

/// True for ls, cat, rm and cp.
bool is_files_command(const std::string& command);

/// Runs one of them with its arguments; the exit code.
int files_command(net::rpc_client& client, const std::string& context, const std::string& command,
                  std::vector<std::string> rest);

} // namespace boxrt::boxctl
