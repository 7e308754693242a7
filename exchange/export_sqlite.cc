#include "exchange/export_sqlite.h"

#include <cstdio>
#include <stdexcept>

namespace psc::sqlite {

Db::Db(const std::string& path, bool read_only) : path_(path), read_only_(read_only) {
  int rc;
  if (read_only) {
    // immutable=1: no locks, no journal, never written: the file may sit on a
    // read-only medium and nothing about it changes.
    std::string uri = "file:";
    for (char c : path) {
      if (c == '?' || c == '#' || c == '%') {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
        uri += hex;
      } else {
        uri += c;
      }
    }
    uri += "?immutable=1";
    rc = sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  } else {
    rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  }
  if (rc != SQLITE_OK) {
    // A failed open still hands back a handle, which must be closed; the
    // destructor will not run for a constructor that throws.
    const std::string message = std::string("cannot open: ") + (db_ ? sqlite3_errmsg(db_) : "out of memory");
    sqlite3_close_v2(db_);
    db_ = nullptr;
    if (read_only) throw InputError(path_, message);
    throw std::runtime_error(path_ + ": " + message);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

void Db::fail(const std::string& what) const {
  const std::string message = what + (db_ ? std::string(": ") + sqlite3_errmsg(db_) : std::string());
  if (read_only_) throw InputError(path_, message);
  throw std::runtime_error(path_ + ": " + message);
}

void Db::exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    if (read_only_) throw InputError(path_, message);
    throw std::runtime_error(path_ + ": " + message);
  }
}

bool Db::has_table(const std::string& table) {
  Statement s(*this, "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?");
  s.bind(1, table);
  return s.next();
}

bool Db::has_column(const std::string& table, const std::string& column) {
  Statement s(*this, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?");
  s.bind(1, table);
  s.bind(2, column);
  return s.next();
}

Statement::Statement(Db& db, const std::string& sql) : db_(&db) {
  if (sqlite3_prepare_v2(db.get(), sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK)
    db.fail("cannot prepare `" + sql.substr(0, 80) + "`");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::bind(int i, int64_t v) {
  if (sqlite3_bind_int64(stmt_, i, v) != SQLITE_OK) db_->fail("bind");
}
void Statement::bind(int i, std::optional<int64_t> v) { v ? bind(i, *v) : bind_null(i); }
void Statement::bind(int i, std::string_view v) {
  if (sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT) != SQLITE_OK)
    db_->fail("bind");
}
void Statement::bind_null(int i) {
  if (sqlite3_bind_null(stmt_, i) != SQLITE_OK) db_->fail("bind");
}

void Statement::run() {
  const int rc = sqlite3_step(stmt_);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) db_->fail("write");
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::next() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail("read");
}

bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
int64_t Statement::integer(int column) const { return sqlite3_column_int64(stmt_, column); }
std::string Statement::text(int column) const {
  const unsigned char* p = sqlite3_column_text(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
           : std::string();
}

}  // namespace psc::sqlite
