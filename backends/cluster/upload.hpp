// A skill upload (box_upload_skill's zip) forwarded to the workspace's owner: the entry
// node carries the file's bytes inside the request, the owner lands them in a file of its
// own. A path inside a request from another node is never trusted.
#pragma once

#include <cstddef>
#include <string>

#include "messages/error.hpp"
#include "messages/requests.hpp"

namespace boxrt::cluster {

/// The most a forwarded upload may carry: box.limits.max_rpc_file_bytes' own ceiling.
inline constexpr size_t max_forwarded_upload = 104857600;

/// On the entry node: moves the file at `req.file_path` (this node's transfer folder)
/// into `req.file_bytes`, and removes it.
void carry_upload(skill_request& req);

/// On the owner: writes `req.file_bytes` to a new file in `dir` and names it in
/// `req.file_path`. `from_remote`: the request came from another node, whose
/// `file_path` names nothing of this node's and is dropped (the owner would install that
/// file, or unlink it on a refusal, as root). BoxValidationError past
/// max_forwarded_upload; BoxRuntimeUnavailableError when the file cannot be written.
box_error land_upload(skill_request& req, const std::string& dir, bool from_remote);

} // namespace boxrt::cluster
