// A thin RAII layer over the sqlite3 C API for the nsys-sqlite exporter and
// importer: a database, prepared statements, and errors turned into
// exceptions that name the file. Nothing clever: SQLite's own checks are what
// keep a damaged database from doing harm (it answers SQLITE_CORRUPT /
// SQLITE_NOTADB, which become InputError).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "exchange/exporter.h"

namespace psc::sqlite {

class Db {
 public:
  // read_only: opens an existing file without locking or writing it; else
  // creates (or truncates) the file.
  Db(const std::string& path, bool read_only);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }
  void exec(const std::string& sql);
  bool has_table(const std::string& table);
  bool has_column(const std::string& table, const std::string& column);
  // Throws InputError with SQLite's message (reading) or runtime_error (writing).
  [[noreturn]] void fail(const std::string& what) const;

 private:
  // Reading: the SQLite work a query may do, kWorkBase virtual-machine
  // instructions plus kWorkPerByte per byte of the file, counted down in
  // steps by a progress handler.
  static constexpr uint64_t kWorkBase = uint64_t{200} << 20;
  static constexpr uint64_t kWorkPerByte = 2000;

  std::string path_;
  sqlite3* db_ = nullptr;
  bool read_only_;
  uint64_t steps_left_ = 0;
};

class Statement {
 public:
  Statement(Db& db, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds by 1-based index; nullopt binds NULL.
  void bind(int i, int64_t v);
  void bind(int i, std::optional<int64_t> v);
  void bind(int i, std::string_view v);
  void bind_null(int i);
  // Runs an INSERT (or any statement without rows) and resets it.
  void run();
  // Steps a query: true while there is a row.
  bool next();
  bool is_null(int column) const;
  int64_t integer(int column) const;
  double real(int column) const;
  std::string text(int column) const;

 private:
  Db* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace psc::sqlite
