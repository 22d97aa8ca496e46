// The worker registry on a fake clock: registration and incarnations,
// heartbeats and death, task bookkeeping and the assignment queues.
#include "coordinator/worker_registry.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class WorkerRegistryTest : public ::testing::Test {
 protected:
  WorkerRegistryTest()
      : registry_({.period = absl::Seconds(1), .failure_threshold = 3},
                  Clock::Fake([this] { return now_; })) {}

  static chimera::v1::RegisterWorkerRequest Registration(const std::string& id,
                                                         uint64_t incarnation) {
    chimera::v1::RegisterWorkerRequest request;
    request.set_worker_id(id);
    request.set_incarnation(incarnation);
    request.set_node("node-" + id);
    request.set_memory_bytes(int64_t{8} << 30);
    request.set_metrics_address("127.0.0.1:9000");
    request.add_devices()->set_kind("cpu");
    return request;
  }

  // The task the registration made lost; fails the test if it was refused.
  std::optional<TaskRef> MustRegister(
      const chimera::v1::RegisterWorkerRequest& request) {
    absl::StatusOr<std::optional<TaskRef>> lost = registry_.Register(request);
    EXPECT_TRUE(lost.ok()) << lost.status();
    return lost.ok() ? *lost : std::nullopt;
  }

  static chimera::v1::Assignment Stop(const std::string& job_id) {
    chimera::v1::Assignment assignment;
    assignment.mutable_stop()->set_job_id(job_id);
    return assignment;
  }

  chimera::v1::WorkerState StateOf(const std::string& id) {
    return registry_.Get(id)->state();
  }

  // The ids of every DeadWorker the next ReapDead returns.
  std::vector<std::string> Reap() {
    std::vector<std::string> ids;
    for (const DeadWorker& dead : registry_.ReapDead()) {
      ids.push_back(dead.worker_id);
    }
    return ids;
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  WorkerRegistry registry_;
};

TEST(HeartbeatPolicyTest, WorkerIsDeadAfterThresholdTimesPeriod) {
  const HeartbeatPolicy policy{.period = absl::Milliseconds(500),
                               .failure_threshold = 6};
  EXPECT_EQ(policy.DeadAfter(), absl::Seconds(3));
}

// Dead workers used to stay listed for ever: a cluster whose pods come and
// go piled them up in every `chimera workers` and kept their alerts firing.
TEST_F(WorkerRegistryTest, ADeadWorkerIsListedForAWhileThenForgotten) {
  MustRegister(Registration("w1", 11));
  MustRegister(Registration("w2", 12));
  now_ += absl::Seconds(4);
  ASSERT_TRUE(registry_.Heartbeat("w2", 12).ok());
  EXPECT_THAT(Reap(), ElementsAre("w1"));
  EXPECT_EQ(StateOf("w1"), chimera::v1::WORKER_STATE_DEAD);
  now_ += absl::Minutes(9);
  ASSERT_TRUE(registry_.Heartbeat("w2", 12).ok());
  EXPECT_THAT(Reap(), ElementsAre());
  EXPECT_EQ(registry_.List().size(), 2u);
  now_ += absl::Minutes(1) + absl::Seconds(1);
  ASSERT_TRUE(registry_.Heartbeat("w2", 12).ok());
  EXPECT_THAT(Reap(), ElementsAre());
  ASSERT_EQ(registry_.List().size(), 1u);
  EXPECT_EQ(registry_.List()[0].worker_id(), "w2");
  EXPECT_EQ(registry_.Get("w1").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(WorkerRegistryTest, RegisteredWorkerIsIdleWithWhatItReported) {
  EXPECT_FALSE(MustRegister(Registration("w1", 11)).has_value());
  absl::StatusOr<chimera::v1::WorkerInfo> info = registry_.Get("w1");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->worker_id(), "w1");
  EXPECT_EQ(info->incarnation(), 11u);
  EXPECT_EQ(info->node(), "node-w1");
  EXPECT_EQ(info->memory_bytes(), int64_t{8} << 30);
  EXPECT_EQ(info->metrics_address(), "127.0.0.1:9000");
  ASSERT_EQ(info->devices_size(), 1);
  EXPECT_EQ(info->devices(0).kind(), "cpu");
  EXPECT_EQ(info->state(), chimera::v1::WORKER_STATE_IDLE);
  EXPECT_EQ(info->job_id(), "");
  EXPECT_DOUBLE_EQ(info->last_heartbeat_time(), 1000.0);
}

TEST_F(WorkerRegistryTest, UnknownWorkerIsNotFound) {
  EXPECT_EQ(registry_.Get("nobody").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_.Heartbeat("nobody", 1).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_.CheckIncarnation("nobody", 1).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(WorkerRegistryTest, StaleIncarnationIsRejected) {
  MustRegister(Registration("w1", 11));
  MustRegister(Registration("w1", 22));
  EXPECT_TRUE(registry_.CheckIncarnation("w1", 22).ok());
  const absl::Status stale = registry_.CheckIncarnation("w1", 11);
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(stale.message(), HasSubstr("was replaced"));
  EXPECT_EQ(registry_.Heartbeat("w1", 11).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(registry_.TakeAssignment("w1", 11).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(registry_.Get("w1")->incarnation(), 22u);
}

TEST_F(WorkerRegistryTest, NewIncarnationReturnsTheLostTaskAndStartsIdle) {
  MustRegister(Registration("w1", 11));
  ASSERT_TRUE(registry_.Assign("w1", {"job", 2, 3}, Stop("job")).ok());
  std::optional<TaskRef> lost = MustRegister(Registration("w1", 22));
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->job_id, "job");
  EXPECT_EQ(lost->attempt, 2);
  EXPECT_EQ(lost->rank, 3);
  EXPECT_EQ(StateOf("w1"), chimera::v1::WORKER_STATE_IDLE);
  absl::StatusOr<std::optional<chimera::v1::Assignment>> next =
      registry_.TakeAssignment("w1", 22);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->has_value()) << "the old incarnation's queue is dropped";
}

TEST_F(WorkerRegistryTest, RegisteringAgainWithoutATaskLosesNothing) {
  MustRegister(Registration("w1", 11));
  EXPECT_FALSE(MustRegister(Registration("w1", 22)).has_value());
}

// The refused daemon exits on the answer, which says where the other runs.
TEST_F(WorkerRegistryTest, AReplacedIncarnationThatRegistersAgainIsASecondDaemon) {
  MustRegister(Registration("w1", 11));
  now_ += absl::Seconds(5);
  chimera::v1::RegisterWorkerRequest newcomer = Registration("w1", 22);
  newcomer.set_host("10.0.0.7");
  MustRegister(newcomer);
  const absl::StatusOr<std::optional<TaskRef>> again =
      registry_.Register(Registration("w1", 11));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(again.status().message()),
              HasSubstr("another daemon registered as worker 'w1' from host 10.0.0.7 (node "
                        "node-w1, incarnation 22) at 1970-01-01T00:16:45+00:00, replacing this one "
                        "(incarnation 11)"));
  EXPECT_EQ(registry_.Get("w1")->incarnation(), 22u) << "the newer one keeps it";
  EXPECT_TRUE(registry_.Heartbeat("w1", 22).ok());
}

TEST_F(WorkerRegistryTest, SilentWorkerDiesOnlyAfterThePolicysThreshold) {
  MustRegister(Registration("w1", 11));
  now_ += absl::Seconds(3);  // DeadAfter() exactly: still alive.
  EXPECT_TRUE(Reap().empty());
  EXPECT_EQ(StateOf("w1"), chimera::v1::WORKER_STATE_IDLE);
  now_ += absl::Milliseconds(1);
  EXPECT_THAT(Reap(), ElementsAre("w1"));
  EXPECT_EQ(StateOf("w1"), chimera::v1::WORKER_STATE_DEAD);
}

// The coordinator stood still for 12 s (SIGSTOP): every worker's silence
// then was its own doing. Only silence after it counts.
TEST_F(WorkerRegistryTest, SilenceDuringTheCoordinatorsOwnStallIsExcused) {
  MustRegister(Registration("w1", 11));
  MustRegister(Registration("w2", 12));
  now_ += absl::Seconds(2);
  ASSERT_TRUE(registry_.Heartbeat("w2", 12).ok());
  now_ += absl::Seconds(12);
  registry_.ExcuseSilence(absl::Seconds(12));
  EXPECT_TRUE(Reap().empty());
  // w1 was silent 2 s before the stall: 1 s more and it is dead; w2 has its
  // full 3 s.
  now_ += absl::Milliseconds(1001);
  EXPECT_THAT(Reap(), ElementsAre("w1"));
  now_ += absl::Seconds(2);
  EXPECT_THAT(Reap(), ElementsAre("w2"));
}

TEST_F(WorkerRegistryTest, HeartbeatsKeepAWorkerAlive) {
  MustRegister(Registration("w1", 11));
  for (int i = 0; i < 10; ++i) {
    now_ += absl::Seconds(1);
    ASSERT_TRUE(registry_.Heartbeat("w1", 11).ok());
    EXPECT_TRUE(Reap().empty()) << "after " << i + 1 << " s";
  }
  EXPECT_DOUBLE_EQ(registry_.Get("w1")->last_heartbeat_time(), 1010.0);
}

TEST_F(WorkerRegistryTest, DeadWorkerIsReapedOnceWithItsTask) {
  MustRegister(Registration("w1", 11));
  MustRegister(Registration("w2", 12));
  ASSERT_TRUE(registry_.Assign("w1", {"job", 1, 0}, std::nullopt).ok());
  now_ += absl::Seconds(4);
  ASSERT_TRUE(registry_.Heartbeat("w2", 12).ok());
  std::vector<DeadWorker> dead = registry_.ReapDead();
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].worker_id, "w1");
  ASSERT_TRUE(dead[0].task.has_value());
  EXPECT_EQ(dead[0].task->job_id, "job");
  EXPECT_EQ(registry_.Get("w1")->job_id(), "") << "its task is cleared";
  EXPECT_TRUE(Reap().empty()) << "reported as newly dead only once";
}

TEST_F(WorkerRegistryTest, DeadWorkerMustRegisterAgain) {
  MustRegister(Registration("w1", 11));
  now_ += absl::Seconds(4);
  Reap();
  const absl::Status status = registry_.Heartbeat("w1", 11);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(status.message(), HasSubstr("declared dead"));
  EXPECT_EQ(registry_.TakeAssignment("w1", 11).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(registry_.Assign("w1", {"job", 1, 0}, std::nullopt).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(registry_.IdleWorkers().empty());

  MustRegister(Registration("w1", 22));
  EXPECT_EQ(StateOf("w1"), chimera::v1::WORKER_STATE_IDLE);
  EXPECT_TRUE(registry_.Heartbeat("w1", 22).ok());
}

TEST_F(WorkerRegistryTest, IdleWorkersAreAliveTaskFreeInRegistrationOrder) {
  for (const char* id : {"c", "a", "d", "b"}) {
    MustRegister(Registration(id, 1));
  }
  ASSERT_TRUE(registry_.Assign("d", {"job", 1, 0}, std::nullopt).ok());
  MustRegister(Registration("c", 2));  // Keeps its place.
  EXPECT_THAT(registry_.IdleWorkers(), ElementsAre("c", "a", "b"));
  registry_.Release("d");
  EXPECT_THAT(registry_.IdleWorkers(), ElementsAre("c", "a", "d", "b"));
}

TEST_F(WorkerRegistryTest, ListHasEveryWorkerInRegistrationOrderWithState) {
  for (const char* id : {"b", "a", "c"}) {
    MustRegister(Registration(id, 1));
  }
  ASSERT_TRUE(registry_.Assign("a", {"job", 1, 2}, std::nullopt).ok());
  now_ += absl::Seconds(4);
  ASSERT_TRUE(registry_.Heartbeat("a", 1).ok());
  ASSERT_TRUE(registry_.Heartbeat("b", 1).ok());
  Reap();
  std::vector<chimera::v1::WorkerInfo> workers = registry_.List();
  ASSERT_EQ(workers.size(), 3u);
  EXPECT_EQ(workers[0].worker_id(), "b");
  EXPECT_EQ(workers[0].state(), chimera::v1::WORKER_STATE_IDLE);
  EXPECT_EQ(workers[1].worker_id(), "a");
  EXPECT_EQ(workers[1].state(), chimera::v1::WORKER_STATE_BUSY);
  EXPECT_EQ(workers[1].job_id(), "job");
  EXPECT_EQ(workers[1].rank(), 2);
  EXPECT_EQ(workers[2].worker_id(), "c");
  EXPECT_EQ(workers[2].state(), chimera::v1::WORKER_STATE_DEAD);
}

TEST_F(WorkerRegistryTest, BusyWorkerCannotBeAssignedAgainUntilReleased) {
  MustRegister(Registration("w1", 11));
  ASSERT_TRUE(registry_.Assign("w1", {"first", 1, 0}, std::nullopt).ok());
  const absl::Status busy =
      registry_.Assign("w1", {"second", 1, 0}, std::nullopt);
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(busy.message(), HasSubstr("already runs job first"));
  registry_.Release("w1");
  EXPECT_TRUE(registry_.Assign("w1", {"second", 1, 0}, std::nullopt).ok());
  EXPECT_EQ(registry_.Assign("nobody", {"job", 1, 0}, std::nullopt).code(),
            absl::StatusCode::kFailedPrecondition);
}

// A job's ranks are assigned together: a worker taken meanwhile leaves every
// other one free, and no worker can take two ranks.
TEST_F(WorkerRegistryTest, AJobsRanksAreAssignedAllOrNone) {
  for (const char* id : {"a", "b", "c"}) MustRegister(Registration(id, 11));
  ASSERT_TRUE(registry_.Assign("b", {"other", 1, 0}, std::nullopt).ok());
  const absl::Status taken = registry_.AssignRanks({"a", "b", "c"}, "job", 2);
  EXPECT_EQ(taken.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(taken.message(), HasSubstr("worker 'b' already runs job other"));
  EXPECT_EQ(registry_.Get("a")->state(), chimera::v1::WORKER_STATE_IDLE);
  EXPECT_EQ(registry_.Get("c")->state(), chimera::v1::WORKER_STATE_IDLE);
  EXPECT_EQ(registry_.AssignRanks({"a", "a"}, "job", 2).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry_.Get("a")->state(), chimera::v1::WORKER_STATE_IDLE);

  registry_.Release("b");
  ASSERT_TRUE(registry_.AssignRanks({"c", "a"}, "job", 2).ok());
  EXPECT_EQ(registry_.Get("c")->job_id(), "job");
  EXPECT_EQ(registry_.Get("c")->rank(), 0);
  EXPECT_EQ(registry_.Get("a")->rank(), 1);
}

TEST_F(WorkerRegistryTest, AssignmentsArriveInTheOrderTheyWereQueued) {
  MustRegister(Registration("w1", 11));
  ASSERT_TRUE(registry_.Assign("w1", {"job", 1, 0}, Stop("first")).ok());
  registry_.Send("w1", Stop("second"));
  EXPECT_EQ(registry_.Get("w1")->job_id(), "job") << "Send keeps the task";
  for (const char* expected : {"first", "second"}) {
    absl::StatusOr<std::optional<chimera::v1::Assignment>> next =
        registry_.TakeAssignment("w1", 11);
    ASSERT_TRUE(next.ok()) << next.status();
    ASSERT_TRUE(next->has_value());
    EXPECT_EQ((*next)->stop().job_id(), expected);
  }
  absl::StatusOr<std::optional<chimera::v1::Assignment>> none =
      registry_.TakeAssignment("w1", 11);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
}

// A doorbell that counts how often the registry rang it.
struct CountingDoorbell {
  int rings = 0;
  std::shared_ptr<Doorbell> doorbell = std::make_shared<Doorbell>([this] { ++rings; });
};

TEST_F(WorkerRegistryTest, AStreamsDoorbellRingsForItsWorkersAssignmentsOnly) {
  MustRegister(Registration("w1", 11));
  MustRegister(Registration("w2", 12));
  CountingDoorbell stream;
  ASSERT_TRUE(registry_.Watch("w1", 11, stream.doorbell).ok());
  registry_.Send("w2", Stop("someone else's"));
  ASSERT_TRUE(registry_.Assign("w1", {"job", 1, 0}, std::nullopt).ok());
  EXPECT_EQ(stream.rings, 0) << "nothing to send yet";
  registry_.Send("w1", Stop("mine"));
  EXPECT_EQ(stream.rings, 1);
  EXPECT_EQ((*registry_.TakeAssignment("w1", 11))->stop().job_id(), "mine");

  registry_.Unwatch("w1", stream.doorbell.get());
  registry_.Send("w1", Stop("unwatched"));
  EXPECT_EQ(stream.rings, 1) << "a stream that ended is not rung";
}

TEST_F(WorkerRegistryTest, AStreamsDoorbellRingsWhenItsIncarnationEnds) {
  MustRegister(Registration("w1", 11));
  MustRegister(Registration("w2", 12));
  CountingDoorbell replaced;
  CountingDoorbell dying;
  ASSERT_TRUE(registry_.Watch("w1", 11, replaced.doorbell).ok());
  ASSERT_TRUE(registry_.Watch("w2", 12, dying.doorbell).ok());
  MustRegister(Registration("w1", 22));
  EXPECT_EQ(replaced.rings, 1);
  EXPECT_EQ(registry_.TakeAssignment("w1", 11).status().code(), absl::StatusCode::kAborted);

  now_ += absl::Seconds(4);
  ASSERT_TRUE(registry_.Heartbeat("w1", 22).ok());
  registry_.ReapDead();
  EXPECT_EQ(dying.rings, 1);
  EXPECT_EQ(registry_.TakeAssignment("w2", 12).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(registry_.Watch("w2", 12, dying.doorbell).code(), absl::StatusCode::kAborted)
      << "a dead incarnation cannot watch again";

  CountingDoorbell current;
  ASSERT_TRUE(registry_.Watch("w1", 22, current.doorbell).ok());
  registry_.RingAll();
  EXPECT_EQ(current.rings, 1) << "as the coordinator stops";
}

TEST_F(WorkerRegistryTest, AssigningWithoutAStartQueuesNothing) {
  MustRegister(Registration("w1", 11));
  ASSERT_TRUE(registry_.Assign("w1", {"job", 1, 1}, std::nullopt).ok());
  EXPECT_EQ(StateOf("w1"), chimera::v1::WORKER_STATE_BUSY);
  absl::StatusOr<std::optional<chimera::v1::Assignment>> next =
      registry_.TakeAssignment("w1", 11);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->has_value());
}

}  // namespace
}  // namespace chimera::coordinator
