// Split-backward programs made from any generated schedule, for the tests of
// the executor's BACKWARD_INPUT / BACKWARD_WEIGHT that do not depend on the
// zero-bubble generators: every BACKWARD becomes a BACKWARD_INPUT in its
// place, and each program ends with the deferred BACKWARD_WEIGHTs (in the
// order of their BACKWARD_INPUTs), then its collectives and optimizer steps
// in their original order.
// The weights' gradients thus come as late as they can, with every stash
// entry alive until then: the hardest case for the executor's bookkeeping.
//
//   schedule::Schedule split =
//       DeferEveryWeightGradient(*schedule::GenerateSchedule(params));
#ifndef CHIMERA_TESTS_SUPPORT_SPLIT_BACKWARD_SCHEDULE_H_
#define CHIMERA_TESTS_SUPPORT_SPLIT_BACKWARD_SCHEDULE_H_

#include "schedule/program.h"

namespace chimera::testing {

schedule::Schedule DeferEveryWeightGradient(schedule::Schedule schedule);

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_SPLIT_BACKWARD_SCHEDULE_H_
