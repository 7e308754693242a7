// `peakscope version` and `peakscope --version` (its command line:
// cli/command_table.cc).
//
// The version (python/peakscope/_version.py, through the build's generated
// cli/version_value.h), the versions of the files and interfaces this build
// writes and reads, and what the recorder library `record` would preload has:
// read from that library's dynamic symbol table (cli/recorder_library.h), not
// assumed from how this CLI was built, and without loading it.
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/recorder_library.h"
#include "cli/version_value.h"
#include "estimator/calibration.h"
#include "format/file_format.h"
#include "peakscope/estimator.h"
#include "peakscope/peakscope.h"
#include "pricing/saved_price.h"

namespace psc::cli {
namespace {

std::string versions(int oldest, int newest) {
  return oldest == newest ? fmt::format("v{}", newest) : fmt::format("v{} to v{}", oldest, newest);
}

// The hooks a part of the recorder exports, named by the symbols that prove it.
struct Part {
  const char* name;
  std::vector<const char*> symbols;  // all of them: the part is there
};

std::string yes_no(bool yes, const std::string& detail) { return yes ? "yes (" + detail + ")" : "no"; }

void print_library(const PreloadSearch& search) {
  if (search.path.empty()) {
    fmt::print("recorder library: not found: `record` cannot run: {}\n", preload_not_found(search));
    return;
  }
  fmt::print("recorder library: {}{}\n", search.path, search.from_environment ? " (from $PEAKSCOPE_PRELOAD)" : "");
  std::string why;
  try {
    const ElfSymbols library(search.path);
    auto has = [&](const std::vector<const char*>& symbols) {
      for (const char* s : symbols)
        if (!library.defines(s)) return false;
      return !symbols.empty();
    };
    const std::vector<Part> cuda = {
        {"runtime", {"cudaMalloc", "cudaFree"}},
        {"driver", {"cuMemAlloc_v2", "cuMemFree_v2", "cuGetProcAddress"}},
        {"VMM", {"cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease"}},
        {"pools", {"cudaMallocFromPoolAsync", "cuMemAllocFromPoolAsync"}},
        {"PyTorch pluggable allocator", {"psc_torch_malloc", "psc_torch_free"}},
    };
    std::string hooked;
    for (const Part& p : cuda)
      if (has(p.symbols)) hooked += (hooked.empty() ? "" : ", ") + std::string(p.name);
    fmt::print("  CUDA hooks: {}\n", hooked.empty() ? "no" : "yes (" + hooked + ")");
    fmt::print("  NVTX injection: {}\n",
               yes_no(has({"InitializeInjectionNvtx2"}), "NVTX_INJECTION64_PATH, set by `record`"));
    const std::optional<uint32_t> cupti = library.u32("psc_cupti_major");
    fmt::print("  CUPTI: {}\n",
               cupti ? fmt::format("yes (CUPTI {}, loaded at run time after cuInit; PEAKSCOPE_CUPTI)", *cupti) : "no");
    fmt::print("  host allocations (--host): {}\n",
               yes_no(has({"posix_memalign", "aligned_alloc", "memalign"}), "aligned allocations"));
    fmt::print("  C API: {}\n", yes_no(has({"psc_api_version", "psc_range_push", "psc_range_pop", "psc_mark"}),
                                       fmt::format("include/peakscope/peakscope.h, version {}", PSC_API_VERSION)));
  } catch (const std::exception& e) {
    fmt::print("  cannot read its symbols: {}\n", e.what());
  }
}

}  // namespace

int cmd_version(int argc, char** argv) {
  ArgParser args(command_spec("version"));
  if (!args.parse(argc, argv)) return kExitOk;
  fmt::print("peakscope {}\n", kVersionText);
  fmt::print("trace format (.pstrace): writes v{}, reads {}\n", format::kVersion,
             versions(format::kOldestReadVersion, format::kVersion));
  fmt::print("calibration format (calibrate -o): writes v{}, reads {}\n", kCalibrationVersion,
             versions(kOldestCalibrationVersion, kCalibrationVersion));
  fmt::print("saved price reports (price --report): writes v{0}, reads v{0}\n", pricing::kSavedPriceVersion);
  fmt::print("estimator C ABI (libpeakscope_estimator.so): version {}\n", PSC_ESTIMATOR_ABI_VERSION);
  print_library(find_preload_library());
  return kExitOk;
}

}  // namespace psc::cli
