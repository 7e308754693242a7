// Subcommands that later work will fill in. Each says so plainly and exits 2,
// rather than pretending to succeed.
#include "tools/commands.h"

namespace psc::cli {
namespace {
[[noreturn, maybe_unused]] void not_yet(const char* what) {
  throw UsageError(std::string(what) + " is not implemented yet in this version of peakscope");
}
}  // namespace

}  // namespace psc::cli
