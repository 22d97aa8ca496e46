# Writes OUTPUT (a C++ source defining chimera::GetBuildInfo) from the
# checkout's current commit, at every build, touching the file only when
# its text changes so that nothing recompiles needlessly. A source tree
# without git data (the container image's build) takes the commit from
# $CHIMERA_GIT_COMMIT.
#
#   cmake -DSOURCE_DIR=... -DOUTPUT=... -DVERSION=... -DBUILD_TYPE=...
#         -DTORCH_VERSION=... -P cmake/WriteBuildInfo.cmake
execute_process(
  COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE no_git ERROR_QUIET)
if(no_git AND NOT "$ENV{CHIMERA_GIT_COMMIT}" STREQUAL "")
  set(commit "$ENV{CHIMERA_GIT_COMMIT}")
elseif(no_git)
  set(commit "unknown")
else()
  execute_process(
    COMMAND git -C "${SOURCE_DIR}" diff --quiet HEAD --
    RESULT_VARIABLE dirty ERROR_QUIET)
  if(dirty)
    string(APPEND commit "-dirty")
  endif()
endif()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE "unspecified")
endif()
file(WRITE "${OUTPUT}.new" "// Generated at build time by cmake/WriteBuildInfo.cmake.
#include \"common/build_info.h\"

namespace chimera {

const BuildInfo& GetBuildInfo() {
  static const BuildInfo info{\"${VERSION}\", \"${commit}\", \"${BUILD_TYPE}\",
                              \"${TORCH_VERSION}\"};
  return info;
}

}  // namespace chimera
")
configure_file("${OUTPUT}.new" "${OUTPUT}" COPYONLY)
file(REMOVE "${OUTPUT}.new")
