// Durable admission state (contract §4.11): one record per workspace (fence, highest
// revision, tombstone, snapshot, host-pushed grant), committed before the reply that
// acknowledges it and read back before the workspace serves again. The interface is
// small so a replicated store (the cluster) can stand beside the local SQLite one.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "messages/error.hpp"

struct sqlite3;

namespace boxrt {

class admission_store {
 public:
  virtual ~admission_store() = default;

  /// The record of `key` (instance and workspace), or nullopt when there is none.
  virtual result<std::optional<std::string>> get(const std::string& key) = 0;

  /// Stores `state` as the record of `key`; durable when it returns without error.
  virtual box_error put(const std::string& key, const std::string& state) = 0;
};

/// `<host_root>/state/admission.sqlite`: WAL, synchronous=FULL, one row per workspace.
/// Thread-safe (one connection behind a mutex).
class sqlite_admission_store final : public admission_store {
 public:
  /// Opens (or, with `create`, creates) the database and checks it. Errors name the
  /// file and what is wrong with it.
  static result<std::shared_ptr<sqlite_admission_store>> open(const std::string& path,
                                                              bool create);
  ~sqlite_admission_store() override;

  result<std::optional<std::string>> get(const std::string& key) override;
  box_error put(const std::string& key, const std::string& state) override;

  /// Test hook (server.testing only): boxd kills itself with SIGKILL right after the
  /// n-th commit, before anything acknowledges it. 0 = never.
  void crash_after_commits(uint64_t n) { crash_after_ = n; }

 private:
  explicit sqlite_admission_store(sqlite3* db, std::string path);

  sqlite3* db_;
  std::string path_;
  std::mutex mtx_;
  uint64_t commits_ = 0;
  uint64_t crash_after_ = 0;
};

/// How boxd opens its admission state at start.
struct admission_state_options {
  std::string host_root;
  bool admission_mode = false;
  /// --init-state: start with empty state where the database is missing.
  bool init_state = false;
  /// The data directory already holds tenant state (workspaces or skills).
  bool tenant_state_exists = false;
};

struct admission_state_opening {
  std::shared_ptr<sqlite_admission_store> store;
  /// Set when boxd must not start; the reason, for the operator.
  std::string refusal;
  /// What happened, for the log (created, recreated after corruption, ...).
  std::string note;
};

/// The rules of contract §4.11: in admission mode a corrupt or unreadable database, or
/// a missing one where tenant state exists, refuses the start unless --init-state (for
/// the missing one); in standard mode a bad database is moved aside and recreated.
admission_state_opening open_admission_state(const admission_state_options& opts);

/// The database path under `host_root`.
std::string admission_state_path(const std::string& host_root);

} // namespace boxrt
