#include "worker/comm/shared_memory_collectives.h"

#include <ATen/ATen.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <optional>
#include <random>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/comm/torch_error.h"

namespace chimera::worker {
namespace {

// The start of every segment; the tensor's bytes follow at kHeaderBytes.
struct SegmentHeader {
  uint64_t token;  // proves a peer mapped the segment its owner published
  std::atomic<uint32_t> phase;  // 3 per finished Sum, 2 per other collective
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(SegmentHeader) <= kHeaderBytes);

// How often a blocked wait looks at the cancellation flag.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(100);
// How often the rendezvous asks the store for a member's key.
constexpr absl::Duration kStorePollInterval = absl::Milliseconds(5);

// A member's verdict when it mapped every segment; an offer that starts
// with kNoOffer says why the member has no segment.
constexpr char kAccepted[] = "ok";
constexpr char kNoOffer[] = "!";

SegmentHeader& HeaderOf(const SharedMemorySegment& segment) {
  return *static_cast<SegmentHeader*>(segment.data());
}

uint32_t* FutexWord(std::atomic<uint32_t>& word) {
  return reinterpret_cast<uint32_t*>(&word);
}

// Sleeps while `word` still holds `seen`, at most `timeout`.
void FutexWait(std::atomic<uint32_t>& word, uint32_t seen,
               absl::Duration timeout) {
  const timespec relative = absl::ToTimespec(timeout);
  syscall(SYS_futex, FutexWord(word), FUTEX_WAIT, seen, &relative, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, FutexWord(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool Reached(uint32_t phase, uint32_t target) {
  return static_cast<int32_t>(phase - target) >= 0;  // survives wrap-around
}

absl::Status StoreSet(c10d::Store& store, const std::string& key,
                      const std::string& value) {
  try {
    store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot write '", key,
                     "' to the rendezvous store: ", TorchErrorMessage(e)));
  }
}

// Polls, so that a cancelled rendezvous ends at once instead of when the
// store's wait would.
absl::StatusOr<std::string> StoreGet(c10d::Store& store, const std::string& key,
                                     const SharedMemoryOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  try {
    while (!store.check({key})) {
      if (options.cancelled != nullptr && options.cancelled->load()) {
        return absl::CancelledError("shared-memory rendezvous cancelled");
      }
      if (absl::Now() >= deadline) {
        return absl::UnavailableError(
            absl::StrCat("no '", key, "' in the rendezvous store within ",
                         absl::FormatDuration(options.timeout)));
      }
      absl::SleepFor(kStorePollInterval);
    }
    const std::vector<uint8_t> value = store.get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot read '", key,
                     "' from the rendezvous store: ", TorchErrorMessage(e)));
  }
}

uint64_t RandomToken() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// This member's segment, its token written, or why there is none.
absl::StatusOr<SharedMemorySegment> CreateOwnSegment(
    int rank, size_t bytes, const SharedMemoryOptions& options,
    uint64_t token) {
  if (!options.enabled) {
    return absl::FailedPreconditionError(
        absl::StrCat("member ", rank, " does not use shared memory"));
  }
  ASSIGN_OR_RETURN(SharedMemorySegment segment,
                   SharedMemorySegment::Create(RandomSegmentName(), bytes));
  HeaderOf(segment).token = token;
  return segment;
}

// Maps the segment member `member` offered as "NAME TOKEN" (or "!WHY NOT").
absl::StatusOr<SharedMemorySegment> OpenPeerSegment(int member,
                                                    const std::string& offer,
                                                    size_t bytes) {
  if (absl::StartsWith(offer, kNoOffer)) {
    return absl::FailedPreconditionError(offer.substr(1));
  }
  const std::vector<std::string> fields = absl::StrSplit(offer, ' ');
  uint64_t token = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[1], &token)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "member ", member, " offered a malformed segment '", offer, "'"));
  }
  ASSIGN_OR_RETURN(SharedMemorySegment segment,
                   SharedMemorySegment::Open(fields[0], bytes));
  if (HeaderOf(segment).token != token) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared memory ", fields[0], " is not member ", member, "'s"));
  }
  return segment;
}

// The store keys of one group's exchange: each member's offer of a segment
// and its verdict on the others'.
struct ExchangeKeys {
  std::string prefix;
  std::string Offer(int member) const {
    return absl::StrCat(prefix, "/offer/", member);
  }
  std::string Verdict(int member) const {
    return absl::StrCat(prefix, "/verdict/", member);
  }
};

// The three rounds of Join. Each returns the store's own failure; a member
// that cannot share (no segment of its own, a peer's it cannot map, a peer
// that declined) records why in *problem and goes on with the rounds, so
// that no member waits for it in vain.
absl::Status OfferOwnSegment(c10d::Store& store, const ExchangeKeys& keys,
                             int rank, size_t bytes,
                             const SharedMemoryOptions& options, uint64_t token,
                             std::optional<SharedMemorySegment>* own,
                             absl::Status* problem) {
  absl::StatusOr<SharedMemorySegment> created =
      CreateOwnSegment(rank, bytes, options, token);
  if (!created.ok()) {
    *problem = created.status();
    return StoreSet(store, keys.Offer(rank),
                    absl::StrCat(kNoOffer, problem->message()));
  }
  RETURN_IF_ERROR(StoreSet(store, keys.Offer(rank),
                           absl::StrCat(created->name(), " ", token)));
  *own = *std::move(created);
  return absl::OkStatus();
}

absl::Status MapPeerSegments(
    c10d::Store& store, const ExchangeKeys& keys, int rank, size_t bytes,
    const SharedMemoryOptions& options,
    std::vector<std::optional<SharedMemorySegment>>& segments,
    absl::Status* problem) {
  for (int member = 0; member < static_cast<int>(segments.size()); ++member) {
    if (member == rank) continue;
    ASSIGN_OR_RETURN(const std::string offer,
                     StoreGet(store, keys.Offer(member), options));
    if (!problem->ok()) continue;
    absl::StatusOr<SharedMemorySegment> peer =
        OpenPeerSegment(member, offer, bytes);
    if (peer.ok()) {
      segments[member] = *std::move(peer);
    } else {
      *problem = peer.status();
    }
  }
  return absl::OkStatus();
}

// The group uses shared memory only when every member mapped every segment.
absl::Status AgreeOnVerdicts(c10d::Store& store, const ExchangeKeys& keys,
                             int rank, int size,
                             const SharedMemoryOptions& options,
                             absl::Status* problem) {
  RETURN_IF_ERROR(StoreSet(store, keys.Verdict(rank),
                           problem->ok() ? std::string(kAccepted)
                                         : std::string(problem->message())));
  for (int member = 0; member < size; ++member) {
    if (member == rank) continue;
    ASSIGN_OR_RETURN(const std::string verdict,
                     StoreGet(store, keys.Verdict(member), options));
    if (problem->ok() && verdict != kAccepted) {
      *problem = absl::FailedPreconditionError(verdict);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemoryCollectives>>
SharedMemoryCollectives::Join(const c10::intrusive_ptr<c10d::Store>& store,
                              const std::string& key_prefix, int rank, int size,
                              size_t capacity_bytes,
                              const SharedMemoryOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "member ", rank, " of a group of ", size, "; need 0 <= member < size"));
  }
  const ExchangeKeys keys{key_prefix};
  const size_t bytes = kHeaderBytes + capacity_bytes;
  std::vector<std::optional<SharedMemorySegment>> segments(size);
  absl::Status problem;
  RETURN_IF_ERROR(OfferOwnSegment(*store, keys, rank, bytes, options,
                                  RandomToken(), &segments[rank], &problem));
  RETURN_IF_ERROR(
      MapPeerSegments(*store, keys, rank, bytes, options, segments, &problem));
  RETURN_IF_ERROR(AgreeOnVerdicts(*store, keys, rank, size, options, &problem));
  // Every member has mapped or given up on this segment: drop its name.
  if (segments[rank]) segments[rank]->Unlink();
  if (!problem.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no shared memory among the group's ", size,
                     " members: ", problem.message()));
  }
  std::vector<SharedMemorySegment> mapped;
  mapped.reserve(size);
  for (auto& segment : segments) mapped.push_back(std::move(*segment));
  return std::unique_ptr<SharedMemoryCollectives>(new SharedMemoryCollectives(
      rank, std::move(mapped), capacity_bytes, options.cancelled));
}

SharedMemoryCollectives::SharedMemoryCollectives(
    int rank, std::vector<SharedMemorySegment> segments, size_t capacity,
    const std::atomic<bool>* cancelled)
    : rank_(rank),
      segments_(std::move(segments)),
      capacity_(capacity),
      cancelled_(cancelled) {}

absl::StatusOr<at::Tensor> SharedMemoryCollectives::Flat(
    const char* operation, const at::Tensor& tensor) const {
  if (!tensor.defined() || !tensor.device().is_cpu() ||
      !tensor.is_contiguous() || tensor.is_sparse() ||
      tensor.nbytes() > capacity_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared-memory ", operation,
        " needs a dense, contiguous CPU tensor of at most ", capacity_,
        " bytes; got ",
        tensor.defined() ? tensor.toString() : "an undefined tensor"));
  }
  return tensor.view({-1});
}

absl::Status SharedMemoryCollectives::Sum(const at::Tensor& tensor,
                                          absl::Duration timeout) {
  ASSIGN_OR_RETURN(const at::Tensor flat, Flat("allreduce", tensor));
  if (segments_.size() == 1 || flat.numel() == 0) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + timeout;
  RETURN_IF_ERROR(SumOwnShard(flat, deadline, "this sum"));
  // Only this member reads its own shard of its segment, so it may write it
  // at once.
  return ExchangeShards(flat, /*steps_done=*/1, deadline, "the summed slices");
}

absl::Status SharedMemoryCollectives::ReduceScatterSum(const at::Tensor& tensor,
                                                       absl::Duration timeout) {
  ASSIGN_OR_RETURN(const at::Tensor flat, Flat("reduce-scatter", tensor));
  if (segments_.size() == 1 || flat.numel() == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      SumOwnShard(flat, absl::Now() + timeout, "this reduce-scatter"));
  PublishPhase(phase_ + 2);
  phase_ += 2;
  return absl::OkStatus();
}

absl::Status SharedMemoryCollectives::AllGather(const at::Tensor& tensor,
                                                absl::Duration timeout) {
  ASSIGN_OR_RETURN(const at::Tensor flat, Flat("all-gather", tensor));
  if (segments_.size() == 1 || flat.numel() == 0) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + timeout;
  RETURN_IF_ERROR(AwaitPreviousCollective(deadline));
  return ExchangeShards(flat, /*steps_done=*/0, deadline, "this all-gather");
}

absl::Status SharedMemoryCollectives::SumOwnShard(const at::Tensor& flat,
                                                  absl::Time deadline,
                                                  const char* what) {
  RETURN_IF_ERROR(AwaitPreviousCollective(deadline));
  View(rank_, flat).copy_(flat);
  PublishPhase(phase_ + 1);
  RETURN_IF_ERROR(AwaitPhase(phase_ + 1, deadline, what));
  at::Tensor own = Shard(flat, rank_);
  at::add_out(own, Shard(View(0, flat), rank_), Shard(View(1, flat), rank_));
  for (int m = 2; m < static_cast<int>(segments_.size()); ++m) {
    own.add_(Shard(View(m, flat), rank_));
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryCollectives::ExchangeShards(const at::Tensor& flat,
                                                     uint32_t steps_done,
                                                     absl::Time deadline,
                                                     const char* what) {
  Shard(View(rank_, flat), rank_).copy_(Shard(flat, rank_));
  const uint32_t published = phase_ + steps_done + 1;
  PublishPhase(published);
  RETURN_IF_ERROR(AwaitPhase(published, deadline, what));
  for (int m = 0; m < static_cast<int>(segments_.size()); ++m) {
    if (m != rank_) Shard(flat, m).copy_(Shard(View(m, flat), m));
  }
  PublishPhase(published + 1);
  phase_ = published + 1;
  return absl::OkStatus();
}

absl::Status SharedMemoryCollectives::AwaitPreviousCollective(
    absl::Time deadline) const {
  // Nobody reads this member's segment any more once every member finished
  // the last collective.
  return AwaitPhase(phase_, deadline, "the end of the previous collective");
}

absl::Status SharedMemoryCollectives::AwaitPhase(uint32_t phase,
                                                 absl::Time deadline,
                                                 const char* what) const {
  for (int m = 0; m < static_cast<int>(segments_.size()); ++m) {
    if (m == rank_) continue;
    std::atomic<uint32_t>& word = HeaderOf(segments_[m]).phase;
    for (uint32_t seen = word.load(std::memory_order_acquire);
         !Reached(seen, phase); seen = word.load(std::memory_order_acquire)) {
      if (cancelled_ != nullptr && cancelled_->load()) {
        return absl::CancelledError("shared-memory collective cancelled");
      }
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError(absl::StrCat(
            "member ", m, " of the group did not reach ", what, " in time"));
      }
      FutexWait(word, seen, std::min(left, kWaitSlice));
    }
  }
  return absl::OkStatus();
}

void SharedMemoryCollectives::PublishPhase(uint32_t phase) {
  std::atomic<uint32_t>& word = HeaderOf(segments_[rank_]).phase;
  word.store(phase, std::memory_order_release);
  FutexWakeAll(word);
}

at::Tensor SharedMemoryCollectives::View(int member,
                                         const at::Tensor& like) const {
  return at::from_blob(
      static_cast<char*>(segments_[member].data()) + kHeaderBytes,
      {like.numel()}, at::TensorOptions().dtype(like.scalar_type()));
}

at::Tensor SharedMemoryCollectives::Shard(const at::Tensor& flat,
                                          int member) const {
  const ShardRange shard =
      ShardOf(flat.numel(), member, static_cast<int>(segments_.size()));
  return flat.narrow(0, shard.begin, shard.size());
}

}  // namespace chimera::worker
