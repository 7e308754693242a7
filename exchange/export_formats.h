// The exporters and importers the registry (exchange/exporter.cc) knows. Each is
// a stateless singleton defined in its format's folder (exchange/nsys/,
// exchange/perfetto/, ...), in export_*.cc or import_*.cc.
#pragma once

#include "exchange/exporter.h"

namespace psc {

const Exporter& perfetto_exporter();
const Exporter& chrome_exporter();
const Exporter& html_exporter();
const Exporter& nvtxt_exporter();
const Exporter& nsys_sqlite_exporter();
const Exporter& torch_snapshot_exporter();

const Importer& nsys_sqlite_importer();
const Importer& torch_snapshot_importer();

}  // namespace psc
