#include "schedule/json_report.h"

#include "nlohmann/json.hpp"

namespace chimera::schedule {

std::string JsonReport(const Schedule& schedule,
                       const SimulationResult& result, absl::string_view scheme) {
  nlohmann::ordered_json report;
  if (!scheme.empty()) report["scheme"] = std::string(scheme);
  const Topology& topology = schedule.topology;
  report["depth"] = topology.depth;
  report["width"] = topology.width;
  report["micro_batches"] = topology.micro_batches;
  report["chunks"] = topology.num_chunks;
  report["makespan"] = result.makespan;
  report["bubble_ratio"] = result.bubble_ratio;
  report["exposed_allreduce"] = result.exposed_allreduce;
  report["critical_path"] = {{"forwards", result.critical_forwards},
                             {"backwards", result.critical_backwards}};
  nlohmann::ordered_json workers = nlohmann::ordered_json::array();
  for (const WorkerResult& w : result.workers) {
    nlohmann::ordered_json worker;
    worker["rank"] = w.rank;
    worker["busy"] = w.busy;
    worker["idle"] = w.idle;
    worker["bubble_ratio"] = w.bubble_ratio;
    worker["peak_activations"] = w.peak_activations;
    worker["exposed_allreduce"] = w.exposed_allreduce;
    nlohmann::ordered_json instructions = nlohmann::ordered_json::array();
    const auto& program = schedule.workers[w.rank].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      const Instruction& inst = program[i];
      instructions.push_back(
          {{"op", OpName(inst.op)},
           {"chunk", inst.chunk},
           {"stage", inst.stage},
           {"micro_batches", std::vector<int>(inst.micro_batches.begin(),
                                              inst.micro_batches.end())},
           {"peer", inst.peer},
           {"part", inst.part},
           {"num_parts", inst.num_parts},
           {"recompute", inst.recompute},
           {"start", w.timings[i].start},
           {"end", w.timings[i].end}});
    }
    worker["instructions"] = std::move(instructions);
    workers.push_back(std::move(worker));
  }
  report["workers"] = std::move(workers);
  return report.dump(2) + "\n";
}

}  // namespace chimera::schedule
