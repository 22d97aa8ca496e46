// A POSIX shared-memory segment (shm_open + mmap) that processes on one host
// map by name: one creates it, the others open it, and once all have mapped
// it the creator unlinks the name, so the memory goes away with its last
// mapping even when a process dies.
//
//   ASSIGN_OR_RETURN(SharedMemorySegment own,
//                    SharedMemorySegment::Create(RandomSegmentName(), bytes));
//   ... publish own.name(), let the peers Open() it ...
//   own.Unlink();
//
// Creation reserves every page up front (posix_fallocate), so a full tmpfs
// (a container's small /dev/shm) is an error here and never a SIGBUS on
// first touch.
#ifndef CHIMERA_WORKER_COMM_SHARED_MEMORY_H_
#define CHIMERA_WORKER_COMM_SHARED_MEMORY_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace chimera::worker {

class SharedMemorySegment {
 public:
  // A new segment of `bytes` (> 0), zero-filled. ALREADY_EXISTS when the
  // name is taken, RESOURCE_EXHAUSTED when the host cannot hold it.
  static absl::StatusOr<SharedMemorySegment> Create(const std::string& name,
                                                    size_t bytes);
  // The segment another process created; NOT_FOUND when no such name exists
  // on this host, FAILED_PRECONDITION when its size is not `bytes`.
  static absl::StatusOr<SharedMemorySegment> Open(const std::string& name,
                                                  size_t bytes);

  SharedMemorySegment(SharedMemorySegment&& other) noexcept;
  SharedMemorySegment& operator=(SharedMemorySegment&& other) noexcept;
  SharedMemorySegment(const SharedMemorySegment&) = delete;
  SharedMemorySegment& operator=(const SharedMemorySegment&) = delete;
  // Unmaps; a creator that never called Unlink() unlinks the name too.
  ~SharedMemorySegment();

  // Removes the name (the mapping stays). Only the creator's call does it.
  void Unlink();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  SharedMemorySegment(std::string name, void* data, size_t size, bool owner)
      : name_(std::move(name)), data_(data), size_(size), owner_(owner) {}

  void Release();

  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;  // created it and has not unlinked it yet
};

// "/chimera-<pid>-<16 random hex digits>": unique on the host.
std::string RandomSegmentName();

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_SHARED_MEMORY_H_
