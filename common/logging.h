// The project's one logging facility: leveled, timestamped lines on stderr.
//
//   CHIMERA_LOG(INFO) << "worker " << rank << " joined";
//   SetMinLogLevel(LogLevel::kWarning);  // or CHIMERA_LOG_LEVEL=warning
//
// A line is written whole with one call, so lines of concurrent threads do not
// interleave. Messages below the minimum level cost one comparison.
#ifndef CHIMERA_COMMON_LOGGING_H_
#define CHIMERA_COMMON_LOGGING_H_

#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Messages below `level` are dropped. The initial level comes from the
// environment variable CHIMERA_LOG_LEVEL (debug|info|warning|error), default
// info.
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();

// Parses "debug", "info", "warning" or "error".
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);

namespace logging_internal {

// Collects one message and writes it when destroyed.
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;

  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Lets the macro below discard a whole `<<` chain in one expression.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace logging_internal
}  // namespace chimera

#define CHIMERA_LOG_LEVEL_DEBUG ::chimera::LogLevel::kDebug
#define CHIMERA_LOG_LEVEL_INFO ::chimera::LogLevel::kInfo
#define CHIMERA_LOG_LEVEL_WARNING ::chimera::LogLevel::kWarning
#define CHIMERA_LOG_LEVEL_ERROR ::chimera::LogLevel::kError

#define CHIMERA_LOG(severity)                                          \
  (CHIMERA_LOG_LEVEL_##severity < ::chimera::MinLogLevel())            \
      ? (void)0                                                        \
      : ::chimera::logging_internal::Voidify() &                       \
            ::chimera::logging_internal::LogMessage(                   \
                CHIMERA_LOG_LEVEL_##severity, __FILE__, __LINE__)      \
                .stream()

#endif  // CHIMERA_COMMON_LOGGING_H_
