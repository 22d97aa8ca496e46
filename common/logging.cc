#include "common/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace chimera {
namespace {

LogLevel LevelFromEnvironment() {
  const char* value = std::getenv("CHIMERA_LOG_LEVEL");
  if (value == nullptr) return LogLevel::kInfo;
  absl::StatusOr<LogLevel> level = ParseLogLevel(value);
  return level.ok() ? *level : LogLevel::kInfo;
}

std::atomic<int>& MinLevelStorage() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnvironment())};
  return level;
}

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

absl::string_view Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

void SetMinLogLevel(LogLevel level) {
  MinLevelStorage().store(static_cast<int>(level));
}

LogLevel MinLogLevel() {
  return static_cast<LogLevel>(MinLevelStorage().load(std::memory_order_relaxed));
}

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(absl::StrCat(
      "log level '", name, "' is not one of debug, info, warning, error"));
}

namespace logging_internal {

LogMessage::LogMessage(LogLevel level, const char* file, int line)
    : level_(level) {
  stream_ << LevelLetter(level) << ' '
          << absl::FormatTime("%Y-%m-%dT%H:%M:%E3S", absl::Now(),
                              absl::UTCTimeZone())
          << ' ' << Basename(file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  std::fwrite(text.data(), 1, text.size(), stderr);
  if (level_ >= LogLevel::kError) std::fflush(stderr);
}

}  // namespace logging_internal
}  // namespace chimera
