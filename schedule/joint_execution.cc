#include "schedule/joint_execution.h"

#include <algorithm>
#include <deque>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

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

namespace {

// The state of one JointExecution::Run: where each program is, what has been
// posted, and who waits on what, so that a blocked worker is queued again
// exactly when the op it waits for has been posted.
class JointRun {
  // One rank's BEGINs and ENDs of one collective slot so far.
  struct Counts {
    int begins = 0;
    int ends = 0;
  };

 public:
  JointRun(const Schedule& schedule,
           const std::vector<std::vector<int>>& holders)
      : schedule_(schedule),
        holders_(holders),
        num_workers_(static_cast<int>(schedule.workers.size())),
        pc_(num_workers_, 0),
        begins_(holders.size() * kNumCollectives),
        end_waiters_(holders.size() * kNumCollectives),
        queued_(num_workers_, true) {
    for (int r = 0; r < num_workers_; ++r) runnable_.push_back(r);
  }

  absl::Status Run(
      const std::function<absl::Status(const ExecutionStep&)>& on_step) {
    while (!runnable_.empty()) {
      const int rank = runnable_.front();
      runnable_.pop_front();
      queued_[rank] = false;
      RETURN_IF_ERROR(RunUntilBlocked(rank, on_step));
    }
    // Everyone finished, or the remaining workers wait on each other.
    for (int r = 0; r < num_workers_; ++r) {
      if (!Finished(r)) return DeadlockError(r);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status RunUntilBlocked(
      int rank,
      const std::function<absl::Status(const ExecutionStep&)>& on_step) {
    const std::vector<Instruction>& program =
        schedule_.workers[rank].instructions;
    while (pc_[rank] < program.size()) {
      ExecutionStep step{rank, pc_[rank], &program[pc_[rank]], std::nullopt,
                         nullptr};
      if (!TryStart(step)) break;
      RETURN_IF_ERROR(on_step(step));
      ++pc_[rank];
    }
    return absl::OkStatus();
  }

  // Posts what `step` posts and fills in what it consumes; false when it
  // must wait, having recorded who is to wake it.
  bool TryStart(ExecutionStep& step) {
    switch (step.inst->op) {
      case OpKind::kSendAct:
      case OpKind::kSendGrad:
        PostSend(step);
        return true;
      case OpKind::kRecvAct:
      case OpKind::kRecvGrad:
        return Receive(step);
      default:
        if (BeginsCollective(step.inst->op)) BeginCollective(step);
        return !EndsCollective(step.inst->op) || EndCollective(step);
    }
  }

  void PostSend(const ExecutionStep& step) {
    const std::optional<MessageKey> key =
        MessageKeyOf(schedule_.topology, step.rank, *step.inst);
    if (!key) return;
    posted_[*key].ids.push_back({step.rank, step.index});
    auto waiter = recv_waiter_.find(*key);
    if (waiter != recv_waiter_.end()) {
      Wake(waiter->second);
      recv_waiter_.erase(waiter);
    }
  }

  bool Receive(ExecutionStep& step) {
    const std::optional<MessageKey> key =
        MessageKeyOf(schedule_.topology, step.rank, *step.inst);
    auto it = key ? posted_.find(*key) : posted_.end();
    if (it == posted_.end()) {
      if (key) recv_waiter_[*key] = step.rank;
      return false;
    }
    PostedSends& sends = it->second;
    step.matched_send = sends.ids[sends.next++];
    if (sends.next == sends.ids.size()) posted_.erase(it);
    return true;
  }

  void BeginCollective(ExecutionStep& step) {
    const int m = ModelStageOf(*step.inst);
    if (!IsModelStage(m)) return;
    const int slot = SlotOf(*step.inst);
    step.occurrence = counts_[{step.rank, slot}].begins++;
    std::vector<InstructionId>& begins = Occurrence(slot, step.occurrence);
    begins.push_back({step.rank, step.index});
    if (begins.size() >= holders_[m].size()) {
      step.group_begins = &begins;
      for (int waiter : end_waiters_[slot]) Wake(waiter);
      end_waiters_[slot].clear();
    }
  }

  bool EndCollective(ExecutionStep& step) {
    const int m = ModelStageOf(*step.inst);
    if (!IsModelStage(m)) return false;
    const int slot = SlotOf(*step.inst);
    int& ends = counts_[{step.rank, slot}].ends;
    const std::vector<InstructionId>& begins = Occurrence(slot, ends);
    if (begins.size() < holders_[m].size()) {
      end_waiters_[slot].push_back(step.rank);
      return false;
    }
    step.occurrence = ends++;
    step.group_begins = &begins;
    return true;
  }

  // The BEGINs of the `k`-th run of a collective slot, added on first use; a
  // deque keeps the ones handed out in steps where they are.
  std::vector<InstructionId>& Occurrence(int slot, int k) {
    std::deque<std::vector<InstructionId>>& runs = begins_[slot];
    while (static_cast<int>(runs.size()) <= k) runs.emplace_back();
    return runs[k];
  }

  void Wake(int rank) {
    if (!queued_[rank]) {
      queued_[rank] = true;
      runnable_.push_back(rank);
    }
  }

  int ModelStageOf(const Instruction& inst) const {
    return schedule_.topology.ModelStage({inst.chunk, inst.stage});
  }
  bool IsModelStage(int m) const {
    return m >= 0 && m < static_cast<int>(holders_.size());
  }
  // Where a collective op's model stage keeps that collective's begins.
  int SlotOf(const Instruction& inst) const {
    return static_cast<int>(*CollectiveOf(inst.op)) *
               static_cast<int>(holders_.size()) +
           ModelStageOf(inst);
  }
  Counts CountsOf(int rank, int slot) const {
    const auto it = counts_.find({rank, slot});
    return it == counts_.end() ? Counts{} : it->second;
  }
  bool Finished(int rank) const {
    return pc_[rank] >= schedule_.workers[rank].instructions.size();
  }

  // Wait-for edges: a blocked receive waits for its peer; a blocked
  // collective's end waits for the first group member that has not begun
  // it. -1: no such rank.
  int WaitsFor(int rank) const {
    const Instruction& inst = schedule_.workers[rank].instructions[pc_[rank]];
    if (EndsCollective(inst.op)) {
      int m = ModelStageOf(inst);
      if (!IsModelStage(m)) return -1;
      const int slot = SlotOf(inst);
      const int k = CountsOf(rank, slot).ends;
      for (int member : holders_[m]) {
        if (CountsOf(member, slot).begins <= k) return member;
      }
      return -1;
    }
    return inst.peer >= 0 && inst.peer < num_workers_ ? inst.peer : -1;
  }

  std::string DescribeWait(int rank) const {
    const Instruction& inst = schedule_.workers[rank].instructions[pc_[rank]];
    const std::optional<Collective> collective = CollectiveOf(inst.op);
    const std::string what = collective ? CollectiveName(*collective) + " begin"
                                        : std::string("matching send");
    return absl::StrCat("rank ", rank, " waits at #", pc_[rank], " ",
                        DescribeInstruction(inst), " for the ", what,
                        " of rank ", WaitsFor(rank));
  }

  // Follows wait-for edges from the stuck rank `first` until a rank repeats
  // (a cycle) or the chain reaches a finished rank (a message never sent).
  absl::Status DeadlockError(int first) const {
    std::vector<int> seen_at(num_workers_, -1);
    std::vector<int> chain;
    int r = first;
    while (r >= 0 && seen_at[r] < 0 && !Finished(r)) {
      seen_at[r] = static_cast<int>(chain.size());
      chain.push_back(r);
      r = WaitsFor(r);
    }
    std::vector<std::string> lines;
    if (r >= 0 && seen_at[r] >= 0) {
      for (size_t i = seen_at[r]; i < chain.size(); ++i) {
        lines.push_back(DescribeWait(chain[i]));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "deadlock: ", lines.size(), " ranks wait on each other in a cycle: ",
          absl::StrJoin(lines, "; ")));
    }
    for (int rank : chain) lines.push_back(DescribeWait(rank));
    return absl::FailedPreconditionError(absl::StrCat(
        "deadlock: ", absl::StrJoin(lines, "; "),
        r >= 0 ? absl::StrCat(", but rank ", r,
                              " finished its program without providing it")
               : std::string(", which does not exist")));
  }

  const Schedule& schedule_;
  const std::vector<std::vector<int>>& holders_;
  const int num_workers_;
  std::vector<size_t> pc_;
  // Sends posted and not yet received, per message key, in posting order:
  // nearly always one, so kept inline (a deque allocated a block per key,
  // which made simulating tens of thousands of micro-batches slow).
  struct PostedSends {
    absl::InlinedVector<InstructionId, 1> ids;
    size_t next = 0;
  };
  absl::flat_hash_map<MessageKey, PostedSends> posted_;
  // Per collective slot (SlotOf) and run of it, the BEGINs posted so far.
  std::vector<std::deque<std::vector<InstructionId>>> begins_;
  // Per (rank, slot), the BEGINs and ENDs that rank has run.
  absl::flat_hash_map<std::pair<int, int>, Counts> counts_;
  // Ranks blocked on a collective's END per slot, to wake on its BEGIN.
  std::vector<std::vector<int>> end_waiters_;
  absl::flat_hash_map<MessageKey, int> recv_waiter_;
  std::vector<bool> queued_;
  std::deque<int> runnable_;
};

}  // namespace

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
  return JointRun(schedule_, holders_).Run(on_step);
}

}  // namespace chimera::schedule
