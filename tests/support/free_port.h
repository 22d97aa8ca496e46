// A loopback TCP port for a server that must be told its port in advance
// (Prometheus' web address, a standalone job's rendezvous store).
#ifndef CHIMERA_TESTS_SUPPORT_FREE_PORT_H_
#define CHIMERA_TESTS_SUPPORT_FREE_PORT_H_

namespace chimera::testing {

// A port nothing is bound to right now, picked at random below the kernel's
// ephemeral range, so that no connection or port-0 bind of the tests
// running alongside takes it before the caller binds it; -1 if none could
// be had. Only another FreePort caller picking the same port could.
int FreePort();

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_FREE_PORT_H_
