// How a worker's process keeps host memory it frees.
//
// A training step allocates and frees tensors of tens of MiB every micro-batch
// (logits, their gradient, an embedding's dense gradient). glibc serves
// blocks above its mmap threshold (at most 32 MiB) with fresh mappings and
// hands freed memory at the top of the heap back to the kernel, so the next
// step's tensor faults in every 4 KiB page again, each zeroed by the kernel.
// Keeping freed memory in the heap for reuse, as the caching allocators that
// LibTorch users put in front of it do, made BERT steps on a 2-vCPU VM
// 1.6-2.1x faster (docs/runtime-measurements.md).
//
//   RetainFreedHostMemory();  // once, before the first tensor op
#ifndef CHIMERA_WORKER_RUNTIME_HOST_MEMORY_H_
#define CHIMERA_WORKER_RUNTIME_HOST_MEMORY_H_

namespace chimera::worker {

// Makes the C library's allocator serve every block from its heap and never
// give freed heap back to the kernel, so a process's resident memory stays
// at its peak and memory is faulted in once. Does nothing where the C
// library is not glibc.
void RetainFreedHostMemory();

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_HOST_MEMORY_H_
