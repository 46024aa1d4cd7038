// The durable record of sandbox uid assignments (`<state>/uids.sqlite`): one row per uid
// a workspace or a session holds, written before the uid is handed out, so a restart
// finds every assignment without scanning any folder (backends/linux/uids.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "messages/error.hpp"

struct sqlite3;

namespace boxrt {

/// One assignment: `holder` is a workspace folder's real path or "session:<sid>";
/// `pinned` when boxd handed the uid a tree it never removes (the uid is never freed).
struct uid_row {
  uint32_t uid = 0;
  std::string holder;
  bool pinned = false;
};

/// SQLite, WAL, synchronous=FULL: a row is on disk when put() returns without error.
/// Thread-safe (one connection behind a mutex).
class uid_ledger {
 public:
  /// Opens (creating it when missing) and checks the database at `path`. A file that
  /// cannot be opened or fails its check is an error naming the file: boxd then does
  /// not use the sandbox backend rather than hand out uids it may have given already.
  static result<std::unique_ptr<uid_ledger>> open(const std::string& path);
  ~uid_ledger();
  uid_ledger(const uid_ledger&) = delete;
  uid_ledger& operator=(const uid_ledger&) = delete;

  /// Every row, in uid order.
  result<std::vector<uid_row>> load();
  /// Records `uid` for `holder` (replacing the uid's row); durable when it returns.
  box_error put(uint32_t uid, const std::string& holder, bool pinned);
  /// Forgets `uid`; durable when it returns.
  box_error erase(uint32_t uid);

  const std::string& path() const { return path_; }

 private:
  uid_ledger(sqlite3* db, std::string path);

  sqlite3* db_;
  std::string path_;
  std::mutex mtx_;
};

} // namespace boxrt
