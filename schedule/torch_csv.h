// Schedules in the CSV action format of PyTorch's torch.distributed.pipelining
// (what TorchTitan's pipeline_parallel_schedule_csv names): one row per
// pipeline rank, one cell per action, "<stage><kind><micro-batch>" with kind
// F (forward), B (whole backward), I (its input half) or W (its weight half):
//
//   0F0,0F1,0I0,0W0,0F2,...
//   1F0,1I0,1W0,1F1,...
//
// Stage s is the model's s-th stage, held by the rank whose row names it; a
// V (stage s and 2R-1-s on rank s) or a loop (stage s on rank s mod R) is
// read from where the stages appear. Reading also takes what PyTorch writes
// for a lowered schedule: communication (SEND_F, RECV_F, SEND_B, RECV_B),
// sharding (UNSHARD, RESHARD) and REDUCE_GRAD, which our program builder
// places itself, and overlapped pairs "(0F2;1B1)OVERLAP_F_B", run in their
// order. Empty cells are idle steps.
//
// The format has no replicated stages (Chimera's down and up pipelines), no
// doubled forward and no part of a halved backward: schedules with one are
// not written. Recomputation is not part of it either (TorchTitan configures
// activation checkpointing apart). A data-parallel schedule is written as
// its first replica's ranks, which every replica runs.
//
//   ASSIGN_OR_RETURN(std::string csv, WriteTorchScheduleCsv(schedule));
//   ASSIGN_OR_RETURN(Schedule back, ReadTorchScheduleCsv(csv));
#ifndef CHIMERA_SCHEDULE_TORCH_CSV_H_
#define CHIMERA_SCHEDULE_TORCH_CSV_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schedule/program.h"

namespace chimera::schedule {

// InvalidArgument saying what the format cannot hold.
absl::StatusOr<std::string> WriteTorchScheduleCsv(const Schedule& schedule);

// The programs of the actions' order (receives, sends, gradient allreduces
// and the optimizer step placed as for a generated schedule), for one
// data-parallel replica. InvalidArgument naming the row and column of a
// malformed cell, a stage on two ranks, a forward or backward missing or
// repeated, or an order that cannot run.
absl::StatusOr<Schedule> ReadTorchScheduleCsv(absl::string_view csv);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_TORCH_CSV_H_
