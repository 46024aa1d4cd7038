#include "backends/state/uid_ledger.hpp"

#include <limits>

#include <sqlite3.h>

#include <fmt/format.h>

namespace boxrt {

namespace {

/// One prepared statement, finalized at scope end.
struct statement {
  sqlite3_stmt* stmt = nullptr;
  ~statement() { sqlite3_finalize(stmt); }
};

/// How every error of the record reads: the file, what is wrong, and the way out.
box_error ledger_error(const std::string& path, const std::string& what) {
  return box_error{ec::runtime, fmt::format("sandbox uid record {}: {}", path, what)};
}

} // namespace

uid_ledger::uid_ledger(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

uid_ledger::~uid_ledger() {
  sqlite3_close_v2(db_);
}

result<std::unique_ptr<uid_ledger>> uid_ledger::open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  // Never repaired or recreated here: an empty record would let uids go to a second
  // workspace. The operator decides, and a moved-aside file is rebuilt by the scan.
  const std::string advice = "; move it aside to rebuild it from the tenants folder (docs/sandbox.md, \"Sandbox uids\")";
  auto fail = [&](const std::string& what) -> result<std::unique_ptr<uid_ledger>> {
    sqlite3_close_v2(db);
    return ledger_error(path, what + advice);
  };
  if (rc != SQLITE_OK)
    return fail(db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  sqlite3_busy_timeout(db, 5000);
  // quick_check reads every page: a damaged file fails here, not on a later write.
  {
    statement st;
    if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st.stmt, nullptr) != SQLITE_OK)
      return fail(sqlite3_errmsg(db));
    if (sqlite3_step(st.stmt) != SQLITE_ROW)
      return fail(sqlite3_errmsg(db));
    auto text = reinterpret_cast<const char*>(sqlite3_column_text(st.stmt, 0));
    if (std::string{text ? text : ""} != "ok")
      return fail(std::string{"integrity check failed: "} + (text ? text : ""));
  }
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                          "CREATE TABLE IF NOT EXISTS uids (uid INTEGER PRIMARY KEY, holder TEXT NOT NULL, "
                          "pinned INTEGER NOT NULL DEFAULT 0)"}) {
    char* msg = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
      std::string what = msg ? msg : sqlite3_errmsg(db);
      sqlite3_free(msg);
      return fail(what);
    }
  }
  std::unique_ptr<uid_ledger> out{new uid_ledger{db, path}};
  // The rows are read once now, so a table of another shape is refused at start too.
  if (auto rows = out->load(); !rows)
    return box_error{ec::runtime, rows.error().message + advice};
  return out;
}

result<std::vector<uid_row>> uid_ledger::load() {
  std::lock_guard lock{mtx_};
  statement st;
  if (sqlite3_prepare_v2(db_, "SELECT uid, holder, pinned FROM uids ORDER BY uid", -1, &st.stmt, nullptr)
      != SQLITE_OK)
    return ledger_error(path_, sqlite3_errmsg(db_));
  std::vector<uid_row> rows;
  int rc;
  while ((rc = sqlite3_step(st.stmt)) == SQLITE_ROW) {
    auto uid = sqlite3_column_int64(st.stmt, 0);
    auto holder = reinterpret_cast<const char*>(sqlite3_column_text(st.stmt, 1));
    if (uid <= 0 || uid > std::numeric_limits<uint32_t>::max() || holder == nullptr || *holder == '\0')
      return ledger_error(path_, "a row is malformed (uid " + std::to_string(uid) + ")");
    rows.push_back({static_cast<uint32_t>(uid), holder, sqlite3_column_int(st.stmt, 2) != 0});
  }
  if (rc != SQLITE_DONE)
    return ledger_error(path_, sqlite3_errmsg(db_));
  return rows;
}

box_error uid_ledger::put(uint32_t uid, const std::string& holder, bool pinned) {
  std::lock_guard lock{mtx_};
  statement st;
  if (sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO uids (uid, holder, pinned) VALUES (?, ?, ?)", -1, &st.stmt,
                         nullptr)
      != SQLITE_OK)
    return ledger_error(path_, sqlite3_errmsg(db_));
  sqlite3_bind_int64(st.stmt, 1, uid);
  sqlite3_bind_text(st.stmt, 2, holder.data(), static_cast<int>(holder.size()), SQLITE_STATIC);
  sqlite3_bind_int(st.stmt, 3, pinned ? 1 : 0);
  // One statement is one transaction; with synchronous=FULL it is on disk when done.
  if (sqlite3_step(st.stmt) != SQLITE_DONE)
    return ledger_error(path_, sqlite3_errmsg(db_));
  return {};
}

box_error uid_ledger::erase(uint32_t uid) {
  std::lock_guard lock{mtx_};
  statement st;
  if (sqlite3_prepare_v2(db_, "DELETE FROM uids WHERE uid = ?", -1, &st.stmt, nullptr) != SQLITE_OK)
    return ledger_error(path_, sqlite3_errmsg(db_));
  sqlite3_bind_int64(st.stmt, 1, uid);
  if (sqlite3_step(st.stmt) != SQLITE_DONE)
    return ledger_error(path_, sqlite3_errmsg(db_));
  return {};
}

} // namespace boxrt
