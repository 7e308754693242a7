#include "exchange/exporter.h"

#include <cstdio>

#include "exchange/export_formats.h"

namespace psc {

InputError::InputError(const std::string& path, const std::string& reason, uint64_t offset)
    : std::runtime_error(path + ": " + reason + (offset == kNoOffset ? "" : " at byte " + std::to_string(offset))),
      path_(path),
      offset_(offset) {}

const std::vector<const Exporter*>& exporters() {
  static const std::vector<const Exporter*> all = {&perfetto_exporter(),    &chrome_exporter(),
                                                   &html_exporter(),        &nvtxt_exporter(),
                                                   &nsys_sqlite_exporter(), &torch_snapshot_exporter()};
  return all;
}

const std::vector<const Importer*>& importers() {
  static const std::vector<const Importer*> all = {&nsys_sqlite_importer(), &torch_snapshot_importer()};
  return all;
}

const Exporter* find_exporter(std::string_view name) {
  for (const Exporter* e : exporters())
    if (e->name() == name) return e;
  return nullptr;
}

const Importer* find_importer(std::string_view name) {
  for (const Importer* i : importers())
    if (i->name() == name) return i;
  return nullptr;
}

void Exporter::write_run(const Run& run, const ExportOptions&) const {
  throw std::invalid_argument("--format " + std::string(name()) + " holds one trace, not a run of " +
                              std::to_string(run.members.size()) +
                              "; export one of them, or use --format perfetto, chrome or nsys-sqlite");
}

void emit_warning(const WarningSink& sink, const std::string& text) {
  if (sink) {
    sink(text);
    return;
  }
  std::fprintf(stderr, "peakscope: warning: %s\n", text.c_str());
}

}  // namespace psc
