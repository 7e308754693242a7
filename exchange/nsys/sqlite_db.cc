#include "exchange/nsys/sqlite_db.h"

#include <cstdio>
#include <stdexcept>

#include "common/input_file.h"

namespace psc::sqlite {

namespace {

// SQLite calls this every kProgressStep virtual-machine instructions; a
// non-zero answer interrupts the statement (SQLITE_INTERRUPT).
constexpr int kProgressStep = 1000;

int over_budget(void* context) {
  uint64_t& steps_left = *static_cast<uint64_t*>(context);
  if (steps_left == 0) return 1;
  --steps_left;
  return 0;
}

}  // namespace

Db::Db(const std::string& path, bool read_only) : path_(path), read_only_(read_only) {
  int rc;
  if (read_only) {
    // SQLite's own open would wait on a FIFO and read a device; only a
    // regular file is a database to import.
    const InputFile input(path);
    if (!input.ok()) throw InputError(path_, input.error());
    steps_left_ = (kWorkBase + kWorkPerByte * input.size()) / kProgressStep;
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
  // A query of a crafted file (a recursive view, a vast join) must end: the
  // work SQLite may do grows with the file, then the read fails.
  if (read_only) sqlite3_progress_handler(db_, kProgressStep, over_budget, &steps_left_);
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

void Db::fail(const std::string& what) const {
  const bool interrupted = read_only_ && db_ && sqlite3_errcode(db_) == SQLITE_INTERRUPT && steps_left_ == 0;
  const std::string message =
      interrupted ? what + ": gave up after more work than a database of this size needs (a recursive view?)"
                  : what + (db_ ? std::string(": ") + sqlite3_errmsg(db_) : std::string());
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

// Reading, only tables count: what nsys writes, and a view (recursive, say)
// could make a plain SELECT run without end.
bool Db::has_table(const std::string& table) {
  Statement s(*this, read_only_ ? "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
                                : "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?");
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
double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }
std::string Statement::text(int column) const {
  const unsigned char* p = sqlite3_column_text(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
           : std::string();
}

}  // namespace psc::sqlite
