// OpenStreams: many server-streaming calls held open at once, as the
// clients of a coordinator hold them (workers their assignment streams,
// users following jobs), without a thread each: one completion queue and
// one thread keep a read pending on every stream until it ends. Destroying
// it cancels every stream and waits for each to end.
//
//   OpenStreams<chimera::v1::JobEvent> followers;
//   followers.Open([&](grpc::ClientContext* context, grpc::CompletionQueue* queue) {
//     return stub->PrepareAsyncWatchJob(context, request, queue);
//   });
//   followers.AwaitAnswered(1, absl::Seconds(30));
#ifndef CHIMERA_BENCH_OPEN_STREAMS_H_
#define CHIMERA_BENCH_OPEN_STREAMS_H_

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace chimera::bench {

template <typename Message>
class OpenStreams {
 public:
  using Prepare = std::function<std::unique_ptr<grpc::ClientAsyncReader<Message>>(
      grpc::ClientContext*, grpc::CompletionQueue*)>;

  OpenStreams() : reader_([this] { ReadAll(); }) {}
  ~OpenStreams() {
    {
      absl::MutexLock lock(&mutex_);
      stop_ = true;
      for (Stream& stream : streams_) stream.context.TryCancel();
    }
    reader_.join();
    queue_.Shutdown();
    void* tag;
    bool ok;
    while (queue_.Next(&tag, &ok)) {
    }
  }
  OpenStreams(const OpenStreams&) = delete;
  OpenStreams& operator=(const OpenStreams&) = delete;

  // Starts a call that `prepare` sets up (a stub's PrepareAsync... method).
  void Open(const Prepare& prepare) {
    absl::MutexLock lock(&mutex_);
    Stream& stream = streams_.emplace_back();
    stream.call = prepare(&stream.context, &queue_);
    stream.call->StartCall(&stream);
  }

  // Waits until `count` streams have each received a message, or `timeout`
  // passes; returns how many have.
  int AwaitAnswered(int count, absl::Duration timeout) {
    absl::MutexLock lock(&mutex_);
    auto done = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
      return answered_ >= count;
    };
    mutex_.AwaitWithTimeout(absl::Condition(&done), timeout);
    return answered_;
  }

 private:
  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientAsyncReader<Message>> call;
    Message received;
    grpc::Status status;
    bool started = false;
    bool answered = false;
    bool finishing = false;
  };

  // Keeps a read pending on every open stream until, once stopped, each has
  // ended.
  void ReadAll() {
    size_t ended = 0;
    while (true) {
      {
        absl::MutexLock lock(&mutex_);
        if (stop_ && ended == streams_.size()) return;
      }
      void* tag;
      bool ok;
      const auto next = queue_.AsyncNext(
          &tag, &ok, absl::ToChronoTime(absl::Now() + absl::Milliseconds(100)));
      if (next != grpc::CompletionQueue::GOT_EVENT) continue;
      auto* stream = static_cast<Stream*>(tag);
      if (stream->finishing) {
        ++ended;
      } else if (ok) {
        NoteAnswer(*stream);
        stream->call->Read(&stream->received, stream);
      } else {
        stream->finishing = true;
        stream->call->Finish(&stream->status, stream);
      }
    }
  }

  // The first completion is the call's start; a later one a message.
  void NoteAnswer(Stream& stream) {
    if (!stream.started) {
      stream.started = true;
      return;
    }
    if (stream.answered) return;
    stream.answered = true;
    absl::MutexLock lock(&mutex_);
    ++answered_;
  }

  grpc::CompletionQueue queue_;
  absl::Mutex mutex_;
  // A deque: streams do not move as more are opened.
  std::deque<Stream> streams_ ABSL_GUARDED_BY(mutex_);
  bool stop_ ABSL_GUARDED_BY(mutex_) = false;
  int answered_ ABSL_GUARDED_BY(mutex_) = 0;
  std::thread reader_;
};

}  // namespace chimera::bench

#endif  // CHIMERA_BENCH_OPEN_STREAMS_H_
