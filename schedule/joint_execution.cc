#include "schedule/joint_execution.h"

#include <algorithm>
#include <deque>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chimera::schedule {

std::optional<MessageKey> MessageKeyOf(const Topology& topology, int rank,
                                       const Instruction& inst) {
  const StageRef here{inst.chunk, inst.stage};
  MessageKey key;
  key.micro_batches = inst.micro_batches;
  key.part = inst.part;
  key.num_parts = inst.num_parts;
  std::optional<StageRef> boundary;
  bool sending = false;
  switch (inst.op) {
    case OpKind::kSendAct:
      boundary = topology.Next(here) ? std::optional<StageRef>(here)
                                     : std::nullopt;
      sending = true;
      break;
    case OpKind::kRecvAct:
      boundary = topology.Prev(here);
      break;
    case OpKind::kSendGrad:
      boundary = topology.Prev(here);
      key.gradient = true;
      sending = true;
      break;
    case OpKind::kRecvGrad:
      boundary = topology.Next(here) ? std::optional<StageRef>(here)
                                     : std::nullopt;
      key.gradient = true;
      break;
    default:
      return std::nullopt;
  }
  if (!boundary) return std::nullopt;
  key.boundary = *boundary;
  key.src = sending ? rank : inst.peer;
  key.dst = sending ? inst.peer : rank;
  return key;
}

std::string DescribeMessage(const MessageKey& key) {
  std::string out = absl::StrCat(
      key.gradient ? "gradient" : "activation", " of chunk ",
      key.boundary.chunk, " stage ", key.boundary.stage, " mb ",
      absl::StrJoin(key.micro_batches, "+"));
  if (key.num_parts > 1) absl::StrAppend(&out, " part ", key.part, "/", key.num_parts);
  absl::StrAppend(&out, " from rank ", key.src, " to rank ", key.dst);
  return out;
}

JointExecution::JointExecution(const Schedule& schedule)
    : schedule_(schedule),
      holders_(schedule.topology.NumModelStages()) {
  for (const WorkerProgram& worker : schedule.workers) {
    for (const StageRef& ref : worker.stages) {
      int m = schedule.topology.ModelStage(ref);
      if (m < 0 || m >= static_cast<int>(holders_.size())) continue;
      std::vector<int>& ranks = holders_[m];
      if (std::find(ranks.begin(), ranks.end(), worker.rank) == ranks.end()) {
        ranks.push_back(worker.rank);
      }
    }
  }
}

absl::Status JointExecution::Run(
    const std::function<absl::Status(const ExecutionStep&)>& on_step) {
  const Topology& topology = schedule_.topology;
  const int num_workers = static_cast<int>(schedule_.workers.size());
  std::vector<size_t> pc(num_workers, 0);
  absl::flat_hash_map<MessageKey, std::deque<InstructionId>> posted;
  std::vector<std::vector<InstructionId>> begins(holders_.size());
  // Ranks blocked on ALLREDUCE_END per model stage, to wake on BEGIN.
  std::vector<std::vector<int>> end_waiters(holders_.size());
  absl::flat_hash_map<MessageKey, int> recv_waiter;
  std::vector<bool> queued(num_workers, true);
  std::deque<int> runnable;
  for (int r = 0; r < num_workers; ++r) runnable.push_back(r);

  auto model_stage_of = [&](const Instruction& inst) {
    return topology.ModelStage({inst.chunk, inst.stage});
  };
  auto wake = [&](int rank) {
    if (!queued[rank]) {
      queued[rank] = true;
      runnable.push_back(rank);
    }
  };

  while (!runnable.empty()) {
    const int rank = runnable.front();
    runnable.pop_front();
    queued[rank] = false;
    const std::vector<Instruction>& program =
        schedule_.workers[rank].instructions;
    while (pc[rank] < program.size()) {
      const Instruction& inst = program[pc[rank]];
      ExecutionStep step{rank, pc[rank], &inst, std::nullopt, nullptr};
      bool blocked = false;
      switch (inst.op) {
        case OpKind::kSendAct:
        case OpKind::kSendGrad: {
          std::optional<MessageKey> key = MessageKeyOf(topology, rank, inst);
          if (key) {
            posted[*key].push_back({rank, pc[rank]});
            auto waiter = recv_waiter.find(*key);
            if (waiter != recv_waiter.end()) {
              wake(waiter->second);
              recv_waiter.erase(waiter);
            }
          }
          break;
        }
        case OpKind::kRecvAct:
        case OpKind::kRecvGrad: {
          std::optional<MessageKey> key = MessageKeyOf(topology, rank, inst);
          auto it = key ? posted.find(*key) : posted.end();
          if (it == posted.end() || it->second.empty()) {
            if (key) recv_waiter[*key] = rank;
            blocked = true;
          } else {
            step.matched_send = it->second.front();
            it->second.pop_front();
          }
          break;
        }
        case OpKind::kAllreduceBegin: {
          int m = model_stage_of(inst);
          if (m >= 0 && m < static_cast<int>(begins.size())) {
            begins[m].push_back({rank, pc[rank]});
            if (begins[m].size() >= holders_[m].size()) {
              for (int waiter : end_waiters[m]) wake(waiter);
              end_waiters[m].clear();
            }
          }
          break;
        }
        case OpKind::kAllreduceEnd: {
          int m = model_stage_of(inst);
          if (m < 0 || m >= static_cast<int>(begins.size()) ||
              begins[m].size() < holders_[m].size()) {
            if (m >= 0 && m < static_cast<int>(begins.size())) {
              end_waiters[m].push_back(rank);
            }
            blocked = true;
          } else {
            step.group_begins = &begins[m];
          }
          break;
        }
        default:
          break;
      }
      if (blocked) break;
      absl::Status status = on_step(step);
      if (!status.ok()) return status;
      ++pc[rank];
    }
  }

  // Everyone finished, or the remaining workers wait on each other.
  std::vector<int> stuck;
  for (int r = 0; r < num_workers; ++r) {
    if (pc[r] < schedule_.workers[r].instructions.size()) stuck.push_back(r);
  }
  if (stuck.empty()) return absl::OkStatus();

  // Wait-for edges: a blocked receive waits for its peer; a blocked
  // allreduce end waits for the first group member that has not begun.
  auto waits_for = [&](int rank) -> int {
    const Instruction& inst = schedule_.workers[rank].instructions[pc[rank]];
    if (inst.op == OpKind::kAllreduceEnd) {
      int m = model_stage_of(inst);
      if (m < 0 || m >= static_cast<int>(holders_.size())) return -1;
      for (int member : holders_[m]) {
        bool began = std::any_of(
            begins[m].begin(), begins[m].end(),
            [&](const InstructionId& id) { return id.rank == member; });
        if (!began) return member;
      }
      return -1;
    }
    return inst.peer >= 0 && inst.peer < num_workers ? inst.peer : -1;
  };
  auto describe_wait = [&](int rank) {
    const Instruction& inst = schedule_.workers[rank].instructions[pc[rank]];
    std::string what = inst.op == OpKind::kAllreduceEnd
                           ? "allreduce begin"
                           : "matching send";
    return absl::StrCat("rank ", rank, " waits at #", pc[rank], " ",
                        DescribeInstruction(inst), " for the ", what,
                        " of rank ", waits_for(rank));
  };
  // Follow edges from the first stuck rank until a rank repeats (a cycle)
  // or the chain reaches a finished rank (a message never sent).
  std::vector<int> seen_at(num_workers, -1);
  std::vector<int> chain;
  int r = stuck.front();
  while (r >= 0 && seen_at[r] < 0 &&
         pc[r] < schedule_.workers[r].instructions.size()) {
    seen_at[r] = static_cast<int>(chain.size());
    chain.push_back(r);
    r = waits_for(r);
  }
  std::vector<std::string> lines;
  if (r >= 0 && seen_at[r] >= 0) {
    for (size_t i = seen_at[r]; i < chain.size(); ++i) {
      lines.push_back(describe_wait(chain[i]));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "deadlock: ", lines.size(), " ranks wait on each other in a cycle: ",
        absl::StrJoin(lines, "; ")));
  }
  for (int rank : chain) lines.push_back(describe_wait(rank));
  return absl::FailedPreconditionError(absl::StrCat(
      "deadlock: ", absl::StrJoin(lines, "; "),
      r >= 0 ? absl::StrCat(", but rank ", r,
                            " finished its program without providing it")
             : std::string(", which does not exist")));
}

}  // namespace chimera::schedule
