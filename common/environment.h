// Settings given by flag or, when the flag is empty, by environment
// variable (CHIMERA_ADDRESS, CHIMERA_TOKEN, CHIMERA_TLS_CA, ...).
#ifndef CHIMERA_COMMON_ENVIRONMENT_H_
#define CHIMERA_COMMON_ENVIRONMENT_H_

#include <cstdlib>
#include <string>

namespace chimera {

// `value` unless empty, else $`variable` unless unset or empty, else
// `fallback`.
inline std::string OrEnvironment(const std::string& value, const char* variable,
                                 const std::string& fallback = "") {
  if (!value.empty()) return value;
  const char* from_env = std::getenv(variable);
  return from_env != nullptr && *from_env != '\0' ? from_env : fallback;
}

}  // namespace chimera

#endif  // CHIMERA_COMMON_ENVIRONMENT_H_
