// boxctl's file commands: ls, cat, rm, cp (app/boxctl_files.cpp, docs/files.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "net/ws/client.hpp"

namespace boxrt::boxctl {

/// True for ls, cat, rm and cp.
bool is_files_command(const std::string& command);

/// Their options (parsed by boxctl's command line).
struct files_flags {
  std::string session = "boxctl";
  bool recursive = false;  // -R / -r
  bool long_form = false;  // ls -l
  bool json = false;       // --json
};

/// Runs one of them with its arguments; the exit code.
int files_command(net::rpc_client& client, const std::string& context, const std::string& command,
                  const std::vector<std::string>& args, const files_flags& flags);

/// Writes `data` to `path` in the session's workspace (the session is created when it
/// does not exist yet), in ranged calls; returns the path as the sandbox shows it.
/// Throws with the server's message.
std::string put_file(net::rpc_client& client, const std::string& context, const std::string& session,
                     const std::string& path, std::string_view data);

/// Removes `path` from the session's workspace; errors are ignored (a clean-up).
void remove_file(net::rpc_client& client, const std::string& context, const std::string& session,
                 const std::string& path);

} // namespace boxrt::boxctl
