#include "backends/state/admission_store.hpp"

#include <filesystem>
#include <system_error>

#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <fmt/format.h>

namespace boxrt {

namespace {

namespace fs = std::filesystem;

box_error store_error(std::string text) {
  return box_error{ec::runtime, std::move(text)};
}

/// Runs `sql` (no results); the SQLite message on failure.
std::string exec(sqlite3* db, const char* sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &msg) == SQLITE_OK)
    return {};
  std::string out = msg ? msg : sqlite3_errmsg(db);
  sqlite3_free(msg);
  return out;
}

/// One prepared statement, finalized at scope end.
struct statement {
  sqlite3_stmt* stmt = nullptr;
  ~statement() { sqlite3_finalize(stmt); }
};

} // namespace

std::string admission_state_path(const std::string& host_root) {
  return (fs::path{host_root} / "state" / "admission.sqlite").string();
}

sqlite_admission_store::sqlite_admission_store(sqlite3* db, std::string path)
  : db_(db), path_(std::move(path)) {}

sqlite_admission_store::~sqlite_admission_store() {
  sqlite3_close_v2(db_);
}

result<std::shared_ptr<sqlite_admission_store>> sqlite_admission_store::open(
  const std::string& path, bool create) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  auto fail = [&](std::string what) -> result<std::shared_ptr<sqlite_admission_store>> {
    std::string text = fmt::format("admission state database {}: {}", path, what);
    sqlite3_close_v2(db);
    return store_error(std::move(text));
  };
  if (rc != SQLITE_OK)
    return fail(db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  sqlite3_busy_timeout(db, 5000);
  // The check reads every page: a file that is not a database, or a damaged one, fails
  // here rather than on a later write.
  std::string integrity;
  {
    statement st;
    if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st.stmt, nullptr) != SQLITE_OK)
      return fail(sqlite3_errmsg(db));
    rc = sqlite3_step(st.stmt);
    if (rc != SQLITE_ROW)
      return fail(sqlite3_errmsg(db));
    integrity = reinterpret_cast<const char*>(sqlite3_column_text(st.stmt, 0));
  }
  if (integrity != "ok")
    return fail("integrity check failed: " + integrity);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                          "CREATE TABLE IF NOT EXISTS admission (key BLOB PRIMARY KEY, "
                          "state TEXT NOT NULL) WITHOUT ROWID"})
    if (auto err = exec(db, sql); !err.empty())
      return fail(err);
  {
    // journal_mode answers with the mode it got; anything but WAL is an error here.
    statement st;
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st.stmt, nullptr);
    if (sqlite3_step(st.stmt) != SQLITE_ROW
        || std::string{reinterpret_cast<const char*>(sqlite3_column_text(st.stmt, 0))} != "wal")
      return fail("cannot use write-ahead logging");
  }
  return std::shared_ptr<sqlite_admission_store>{new sqlite_admission_store{db, path}};
}

result<std::optional<std::string>> sqlite_admission_store::get(const std::string& key) {
  std::lock_guard lock{mtx_};
  statement st;
  if (sqlite3_prepare_v2(db_, "SELECT state FROM admission WHERE key = ?", -1, &st.stmt, nullptr)
      != SQLITE_OK)
    return store_error("admission state: " + std::string{sqlite3_errmsg(db_)});
  sqlite3_bind_blob(st.stmt, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
  int rc = sqlite3_step(st.stmt);
  if (rc == SQLITE_DONE)
    return std::optional<std::string>{};
  if (rc != SQLITE_ROW)
    return store_error("admission state: " + std::string{sqlite3_errmsg(db_)});
  auto text = reinterpret_cast<const char*>(sqlite3_column_text(st.stmt, 0));
  return std::optional<std::string>{std::string{text ? text : ""}};
}

box_error sqlite_admission_store::put(const std::string& key, const std::string& state) {
  std::lock_guard lock{mtx_};
  statement st;
  if (sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO admission (key, state) VALUES (?, ?)", -1,
                         &st.stmt, nullptr)
      != SQLITE_OK)
    return store_error("admission state: " + std::string{sqlite3_errmsg(db_)});
  sqlite3_bind_blob(st.stmt, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
  sqlite3_bind_text(st.stmt, 2, state.data(), static_cast<int>(state.size()), SQLITE_STATIC);
  // One statement is one transaction; with synchronous=FULL it is on disk when done.
  if (sqlite3_step(st.stmt) != SQLITE_DONE)
    return store_error("admission state could not be saved: "
                       + std::string{sqlite3_errmsg(db_)});
  ++commits_;
  if (crash_after_ != 0 && commits_ >= crash_after_)
    ::kill(::getpid(), SIGKILL);
  return {};
}

admission_state_opening open_admission_state(const admission_state_options& opts) {
  admission_state_opening out;
  const auto path = admission_state_path(opts.host_root);
  std::error_code err;
  fs::create_directories(fs::path{path}.parent_path(), err);
  if (err) {
    out.refusal = fmt::format("cannot create {}: {}", fs::path{path}.parent_path().string(),
                              err.message());
    return out;
  }
  const bool exists = fs::exists(fs::symlink_status(path, err));
  if (!exists) {
    if (opts.admission_mode && opts.tenant_state_exists && !opts.init_state) {
      out.refusal = fmt::format(
        "admission state database {} is missing but the data directory holds tenant state; "
        "revocations and revision floors would be forgotten. Restore the file, or start with "
        "--init-state to begin with empty admission state",
        path);
      return out;
    }
    auto created = sqlite_admission_store::open(path, true);
    if (!created) {
      out.refusal = created.error().message;
      return out;
    }
    out.store = created.value();
    out.note = opts.init_state && opts.tenant_state_exists
                 ? fmt::format("admission state database {} created empty (--init-state)", path)
                 : fmt::format("admission state database {} created", path);
    return out;
  }
  auto opened = sqlite_admission_store::open(path, false);
  if (opened) {
    out.store = opened.value();
    return out;
  }
  if (opts.admission_mode) {
    out.refusal = opened.error().message
                  + "; refusing to start in admission mode (move the file aside and start "
                    "with --init-state to begin with empty admission state)";
    return out;
  }
  // Standard mode: the state guards nothing a restart cannot rebuild; keep the bad file.
  auto aside = path + ".corrupt-" + std::to_string(::time(nullptr));
  fs::rename(path, aside, err);
  for (const char* suffix : {"-wal", "-shm"})
    fs::remove(path + suffix, err);
  auto created = sqlite_admission_store::open(path, true);
  if (!created) {
    out.refusal = created.error().message;
    return out;
  }
  out.store = created.value();
  out.note = opened.error().message + "; moved aside to " + aside + " and recreated";
  return out;
}

} // namespace boxrt
