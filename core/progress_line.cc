// The progress line's policy and format (see progress_line.h).
#include "core/progress_line.h"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>

namespace loom {

std::string FormatDuration(double seconds) {
  char buf[32];
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%dh%02dm", s / 3600, (s / 60) % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%dm%02ds", s / 60, s % 60);
  }
  return buf;
}

bool StdoutUpdatesInPlace(bool one_process) {
  return one_process && ::isatty(STDOUT_FILENO) != 0;
}

ProgressLine::ProgressLine(const ProgressLineOptions& options)
    : in_place_(options.in_place),
      log_every_(std::max<int64_t>(1, options.log_every)),
      steps_(options.steps),
      shown_(options.first_step),
      out_(options.out) {}

bool ProgressLine::Show(int64_t step, bool final, const char* fields_format, ...) {
  if (step <= shown_) return false;  // nothing new (or no step yet)
  // With consecutive steps this is step % log_every == 0; the launcher may skip some.
  const bool line = final || step == steps_ || step / log_every_ != shown_ / log_every_;
  if (!in_place_ && !line) return false;
  shown_ = step;
  char fields[512];
  va_list args;
  va_start(args, fields_format);
  std::vsnprintf(fields, sizeof(fields), fields_format, args);
  va_end(args);
  std::fprintf(out_, "%sstep %5lld/%lld | %s%s", in_place_ ? "\r" : "",
               static_cast<long long>(step), static_cast<long long>(steps_), fields,
               line ? "\n" : "");
  std::fflush(out_);
  open_ = !line;
  return true;
}

void ProgressLine::Break() {
  if (!open_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
  open_ = false;
}

}  // namespace loom
