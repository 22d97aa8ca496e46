// A loopback TCP port for a server that must be told its port in advance
// (Prometheus' web address, a standalone job's rendezvous store).
#ifndef CHIMERA_TESTS_SUPPORT_FREE_PORT_H_
#define CHIMERA_TESTS_SUPPORT_FREE_PORT_H_

namespace chimera::testing {

// A port nothing listens on right now (the kernel's next ephemeral one); -1
// if none could be had. Another process may take it before the caller does,
// which the kernel's ephemeral-port rotation makes unlikely.
int FreePort();

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_FREE_PORT_H_
