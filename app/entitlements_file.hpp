// admission.entitlements_file (contract §3): a JSON array of entitlement snapshots an
// operator without a control plane keeps on disk, read at start and on SIGHUP.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "messages/error.hpp"
#include "messages/models.hpp"

namespace boxrt {

/// The largest entitlements file boxd reads.
constexpr size_t max_entitlements_file_bytes = size_t{16} << 20;

/// Every snapshot of the file, each decoded with the rules of a pushed one. Any error
/// (unreadable, too large, not JSON, not an array, one bad snapshot) refuses the whole
/// file, naming the file and, for a bad snapshot, its index: a bad file changes nothing.
result<std::vector<entitlement_snapshot>> read_entitlements_file(const std::string& path);

} // namespace boxrt
