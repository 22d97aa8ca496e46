// What Ctrl-C while following a submitted job says: following stops, the job
// does not, so the user learns both and how to stop the job. Without it the
// CLI died silently and left users believing the job had stopped.
#ifndef CHIMERA_CLIENT_FOLLOW_INTERRUPT_H_
#define CHIMERA_CLIENT_FOLLOW_INTERRUPT_H_

#include <string>

namespace chimera::client {

// From now on, SIGINT and SIGTERM print "stopped following; job ID keeps
// running ..." on stderr and exit 130 (128 + SIGINT) or 143.
void SayJobKeepsRunningOnInterrupt(const std::string& job_id);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_FOLLOW_INTERRUPT_H_
