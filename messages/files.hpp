// The file actions of a session's workspace (docs/files.md): box_read_file,
// box_write_file, box_list_files, box_stat_file, box_remove_file, box_make_dir,
// box_move_file. Plain structs; registered in messages/type_ids.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boxrt/messages/error.hpp>
#include <boxrt/messages/models.hpp>

namespace boxrt {

enum class file_verb : uint8_t { read, write, list, stat, remove, mkdir, move };

/// One file action on a session's workspace. Paths are relative to the workspace root
/// (the dispatcher has taken the sandbox's `mount_path` off an absolute one) and may hold
/// any byte but NUL.
struct file_op {
  file_verb verb = file_verb::stat;
  std::string path;
  /// box_move_file: where to.
  std::string to;
  /// read: where from and how much (length < 0: to the end, within the call's cap).
  /// write: where to write (ignored with `append`).
  int64_t offset = 0;
  int64_t length = -1;
  /// write: the bytes, base64 text when `encoding` is "base64" (decoded on the worker
  /// pool, never on an actor thread).
  std::string content;
  /// write: a new file's mode, and mkdir's (-1: 0644 / 0755).
  int32_t mode = -1;
  bool append = false;
  bool truncate = false;
  bool make_parents = false;
  /// remove: a folder and everything below it. move: replace an existing target.
  bool recursive = false;
  bool overwrite = false;
  /// list: levels below `path` (1: its own entries).
  int32_t depth = 1;
  /// read: how the reply carries the bytes, write: how `content` does ("utf-8": text,
  /// a read's invalid bytes as U+FFFD; "base64": exact; "raw", never on the wire: the
  /// bytes as they are, for the runtime as a library).
  std::string encoding = "utf-8";

  friend bool operator==(const file_op&, const file_op&) = default;
};

/// One entry of a listing or a stat. `path` is relative to the listed folder (list) or
/// the workspace (stat); `type` is "file", "dir", "symlink" or "other".
struct file_entry {
  std::string path;
  std::string type;
  int64_t size = 0;
  int32_t mode = 0;
  /// Seconds since the epoch, with nanoseconds.
  double mtime = 0;
  /// A symlink's target as stored (never followed).
  std::string target;

  friend bool operator==(const file_entry&, const file_entry&) = default;
};

/// What a file action answers: read's bytes (`eof` when the file ends within them) and
/// the file's size; write's bytes written and the file's size after; list's entries
/// (`truncated` when more than the cap); stat's entry.
struct file_result {
  /// What was asked (the wire shapes the reply by it), and the path (and move's target)
  /// as the sandbox shows them.
  file_verb verb = file_verb::stat;
  std::string path;
  std::string to;
  /// read: the encoding the caller asked for ("utf-8", "base64"), and the offset.
  std::string encoding = "utf-8";
  int64_t offset = 0;
  /// read: the bytes as the caller asked for them (text, or base64), and how many raw
  /// bytes they are.
  std::string data;
  int64_t length = 0;
  bool eof = false;
  int64_t size = 0;
  int64_t written = 0;
  std::vector<file_entry> entries;
  bool truncated = false;

  friend bool operator==(const file_result&, const file_result&) = default;
};

/// The bounds of one file action: the server's (server.max_file_call_bytes,
/// server.max_list_entries), never the tenant's; they travel with the request.
struct file_limits {
  /// Bytes one read returns or one write takes.
  int64_t max_call_bytes = 1048576;
  /// Entries one listing returns (more: `truncated`).
  int64_t max_list_entries = 10000;
  /// Levels one listing descends.
  int32_t max_list_depth = 16;

  friend bool operator==(const file_limits&, const file_limits&) = default;
};

/// A file action as it travels to the workspace's supervisor: the tenant's context, the
/// logical session, the action, and the payload's facts (admission mode's forged-field
/// rules). A decode failure travels too, so the forged-field rules win over it.
struct file_request {
  action_context ctx;
  std::string session_id;
  file_op op;
  file_limits limits;
  payload_facts facts;
  box_error decode_error;
};

/// The worker pool's answer to a session's file job.
struct file_outcome {
  file_result result;
  box_error error;
};

} // namespace boxrt
