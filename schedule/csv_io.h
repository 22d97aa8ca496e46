// Schedules as CSV, one instruction per line, so a person can write one by
// hand and run it through `chimera schedule --from-csv FILE`:
//
//   # chimera-schedule depth=2 width=1 micro_batches=1 chunks=1 layout=chained
//   rank,op,chunk,stage,micro_batches,peer,part,num_parts,recompute
//   0,STAGE,0,0
//   0,FORWARD,0,0,0
//   0,SEND_ACT,0,0,0,1
//   ...
//
// The first line gives the Topology; an asynchronous schedule adds
// updates=double-buffered or updates=stashed, and its rows are its repeating
// step (negative micro-batches are the previous step's, Topology::repeating).
// A pipeline with replicated stages adds replication=2:1 (its micro-batches
// are then slices, Topology::replication). STAGE rows declare the stage
// replicas a rank holds; every other row is an instruction, appended to its
// rank's program in file order. micro_batches lists one or two indices joined
// by
// '+'; empty fields take the defaults (peer -1, part 0, num_parts 1,
// recompute 0), and empty fields at a row's end may be left off (the writer
// leaves them off).
//
//   std::string csv = WriteScheduleCsv(schedule);
//   ASSIGN_OR_RETURN(Schedule back, ReadScheduleCsv(csv));
#ifndef CHIMERA_SCHEDULE_CSV_IO_H_
#define CHIMERA_SCHEDULE_CSV_IO_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schedule/program.h"

namespace chimera::schedule {

std::string WriteScheduleCsv(const Schedule& schedule);

// InvalidArgument naming the line and field on malformed input. Does not
// validate the schedule (ValidateSchedule does).
absl::StatusOr<Schedule> ReadScheduleCsv(absl::string_view csv);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_CSV_IO_H_
