// gpu_smoke: the first thing to run on a new GPU machine (scripts/gpu-check
// builds it against the LibTorch of a PyTorch install with CUDA). On GPU 0 it
//   1. runs an in-place NCCL sum-allreduce on one rank over a cudaMalloc'd
//      buffer (no LibTorch involved), checks the result and prints its time;
//   2. when LibTorch has CUDA, builds one GPT stage (embedding, 2 blocks,
//      head) on the GPU and times a forward + loss and a backward.
//
//   gpu_smoke [--elements 16777216] [--repetitions 5]
//
// Exit codes: 0 every check passed; 2 no CUDA device (or driver); 3 the
// LibTorch it was built against has no CUDA, so the stage was not run;
// 1 any CUDA, NCCL or LibTorch error.
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <torch/cuda.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/micro_batch.h"
#include "worker/model/transformer_stage.h"

namespace chimera::worker {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitNoDevice = 2;
constexpr int kExitNoTorchCuda = 3;

absl::Status Cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, " failed: ", cudaGetErrorString(error)));
}

absl::Status Nccl(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, " failed: ", ncclGetErrorString(result)));
}

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

// Owns what the allreduce check allocates, whatever way it ends.
struct NcclResources {
  float* buffer = nullptr;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  ~NcclResources() {
    if (comm != nullptr) ncclCommDestroy(comm);
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (buffer != nullptr) cudaFree(buffer);
  }
};

absl::Status SmokeNccl(size_t elements, int repetitions) {
  NcclResources r;
  RETURN_IF_ERROR(Cuda(cudaMalloc(&r.buffer, elements * sizeof(float)),
                       "cudaMalloc"));
  RETURN_IF_ERROR(Cuda(cudaStreamCreate(&r.stream), "cudaStreamCreate"));
  ncclUniqueId id;
  RETURN_IF_ERROR(Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  RETURN_IF_ERROR(Nccl(ncclCommInitRank(&r.comm, 1, id, 0), "ncclCommInitRank"));
  const std::vector<float> ones(elements, 1.0f);
  RETURN_IF_ERROR(Cuda(cudaMemcpy(r.buffer, ones.data(),
                                  elements * sizeof(float),
                                  cudaMemcpyHostToDevice),
                       "cudaMemcpy to the device"));
  double best = 0;
  for (int i = 0; i <= repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(Nccl(ncclAllReduce(r.buffer, r.buffer, elements,
                                       ncclFloat, ncclSum, r.comm, r.stream),
                         "ncclAllReduce"));
    RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(r.stream),
                         "cudaStreamSynchronize"));
    const double ms = MillisecondsSince(start);
    if (i > 0 && (best == 0 || ms < best)) best = ms;  // 0 is the warm-up
  }
  std::vector<float> result(elements);
  RETURN_IF_ERROR(Cuda(cudaMemcpy(result.data(), r.buffer,
                                  elements * sizeof(float),
                                  cudaMemcpyDeviceToHost),
                       "cudaMemcpy to the host"));
  // One rank: the sum of one 1.0 is 1.0, every time.
  for (size_t i = 0; i < elements; ++i) {
    if (result[i] != 1.0f) {
      return absl::DataLossError(absl::StrCat(
          "allreduce element ", i, " is ", result[i], ", expected 1"));
    }
  }
  const double bytes = static_cast<double>(elements * sizeof(float));
  std::printf("nccl allreduce, 1 rank: %.1f MiB in %.3f ms (best of %d), "
              "%.1f GB/s\n",
              bytes / (1 << 20), best, repetitions, bytes / best / 1e6);
  return absl::OkStatus();
}

absl::Status SmokeStage(int repetitions) {
  ModelConfig config;
  config.num_layers = 2;
  config.hidden_size = 1024;
  config.ffn_size = 4096;
  config.num_heads = 16;
  config.vocab_size = 32000;
  config.seq_length = 512;
  const int64_t batch = 8;
  const c10::Device device(c10::DeviceType::CUDA, 0);
  ASSIGN_OR_RETURN(
      std::shared_ptr<TransformerStage> stage,
      BuildTransformerStage(config, {0, config.num_layers}, 1, device));
  const at::Tensor tokens = at::randint(
      config.vocab_size, {batch, SampleLength(config)}, at::kLong);
  ASSIGN_OR_RETURN(MicroBatch micro_batch,
                   MakeMicroBatch(config, tokens, SampleKey{}));
  const at::Tensor inputs = micro_batch.inputs.to(device);
  double forward_best = 0, backward_best = 0;
  for (int i = 0; i <= repetitions; ++i) {
    auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(at::Tensor loss, stage->Loss(inputs, micro_batch,
                                                  static_cast<double>(batch)));
    RETURN_IF_ERROR(Cuda(cudaDeviceSynchronize(), "forward"));
    const double forward = MillisecondsSince(start);
    start = std::chrono::steady_clock::now();
    loss.backward();
    RETURN_IF_ERROR(Cuda(cudaDeviceSynchronize(), "backward"));
    const double backward = MillisecondsSince(start);
    if (i == 0) continue;  // warm-up: kernels load, the allocator grows
    if (forward_best == 0 || forward < forward_best) forward_best = forward;
    if (backward_best == 0 || backward < backward_best) backward_best = backward;
  }
  std::printf("stage on cuda:0 (GPT, %lld blocks, hidden %lld, sequence %lld, "
              "micro-batch %lld, float32): forward+loss %.2f ms, backward "
              "%.2f ms (best of %d)\n",
              static_cast<long long>(config.num_layers),
              static_cast<long long>(config.hidden_size),
              static_cast<long long>(config.seq_length),
              static_cast<long long>(batch), forward_best, backward_best,
              repetitions);
  return absl::OkStatus();
}

int Run(size_t elements, int repetitions) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gpu_smoke: no CUDA device: %s\n",
                 error != cudaSuccess ? cudaGetErrorString(error)
                                      : "cudaGetDeviceCount found 0 devices");
    return kExitNoDevice;
  }
  cudaDeviceProp properties;
  if (cudaGetDeviceProperties(&properties, 0) == cudaSuccess) {
    std::printf("cuda:0 %s, %.1f GiB, %d CUDA devices; NCCL %d\n",
                properties.name,
                static_cast<double>(properties.totalGlobalMem) / (1 << 30),
                devices, NCCL_VERSION_CODE);
  }
  if (const absl::Status status = SmokeNccl(elements, repetitions);
      !status.ok()) {
    std::fprintf(stderr, "gpu_smoke: %s\n", status.ToString().c_str());
    return kExitFailed;
  }
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr,
                 "gpu_smoke: this LibTorch has no CUDA: build against a "
                 "PyTorch install's (scripts/gpu-check) to run the stage\n");
    return kExitNoTorchCuda;
  }
  absl::Status status;
  try {
    status = SmokeStage(repetitions);
  } catch (const std::exception& e) {
    status = absl::InternalError(e.what());
  }
  if (!status.ok()) {
    std::fprintf(stderr, "gpu_smoke: stage: %s\n", status.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  CLI::App app{"GPU smoke test: NCCL allreduce and one stage on cuda:0"};
  size_t elements = size_t{1} << 24;
  int repetitions = 5;
  app.add_option("--elements", elements, "float32 elements to allreduce")
      ->check(CLI::Range(size_t{1}, size_t{1} << 31));
  app.add_option("--repetitions", repetitions, "Timed runs after a warm-up")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  return chimera::worker::Run(elements, repetitions);
}
