// Disk usage of a folder a tenant may write, for box_get_storage_analysis: counted the
// way langbot-plugin's storage.py counts (every non-folder entry with its lstat size, no
// link followed), walking descriptors only, so a folder swapped for a link mid-walk
// never leads the count outside.
#pragma once

#include <cstdint>
#include <string>

namespace boxrt {

struct tree_usage {
  bool exists = false;
  int64_t size_bytes = 0;
  int64_t file_count = 0;
  int64_t error_count = 0;
};

/// Usage of `rel` ("" = the root itself) beneath the open folder `root`, resolved with
/// no symlink at all. Missing: exists false. Not a folder: one file of its size. Bounded:
/// folders deeper than `max_depth` (one descriptor open per level) are not entered, and
/// after `max_entries` entries the walk stops; each cut counts as an error. Sums
/// saturate. Blocking.
tree_usage measure_tree(int root, const std::string& rel, int max_depth = 64,
                        int64_t max_entries = 1'000'000);

} // namespace boxrt
