// What a command's progress (common/progress.h) shows on a terminal, for
// tests: the lines, with a clock a second later at every look so that every
// advance shows its line.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/progress.h"

namespace psc::test_support {

inline std::vector<std::string> progress_lines(const std::function<void()>& run) {
  uint64_t now = 0;
  std::string shown;
  ProgressReporter reporter(
      true, [&now] { return now += 1'000'000'000; }, [&shown](std::string_view s) { shown += s; });
  {
    ProgressScope scope(reporter);
    run();
  }
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < shown.size()) {
    const size_t end = std::min(shown.find('\r', start + 1), shown.size());
    std::string line = shown.substr(start + 1, end - start - 1);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (!line.empty()) lines.push_back(line);
    start = end;
  }
  return lines;
}

// The line of the last advance of the stage whose label starts with `label`.
inline std::string last_line_of(const std::vector<std::string>& lines, const std::string& label) {
  std::string found;
  for (const std::string& l : lines)
    if (l.rfind("peakscope: " + label, 0) == 0) found = l;
  return found;
}

}  // namespace psc::test_support
