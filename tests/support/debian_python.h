// The Python that tests run scripts with when they need PyTorch.
#ifndef CHIMERA_TESTS_SUPPORT_DEBIAN_PYTHON_H_
#define CHIMERA_TESTS_SUPPORT_DEBIAN_PYTHON_H_

namespace chimera::testing {

// The interpreter Debian's python3-torch serves (a python3 earlier on PATH,
// such as a pyenv one, may have no torch).
inline constexpr char kDebianPython[] = "/usr/bin/python3";

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_DEBIAN_PYTHON_H_
