// Trace recording: the spans of a rank's threads that trace.json shows (docs/architecture.md §3).
// The timers of the timing phases (PhaseTimer, the comm thread's accounting) report every span they
// measure here, so the trace and timing.csv come from the same measurements.
//
// Each thread records into a track of its own: preallocated chunks, written by that thread only
// (no lock, no allocation per span; a new chunk only when the preallocated ones are full).
// Tracing off costs one thread-local load and a branch per span. A Recorder belongs to one rank
// (tests run several ranks in one process); a thread that dtrain starts records into a track
// that the starting thread made for it (new_track, then ThreadScope in the new thread), so the
// tracks' order — the trace's thread ids — is the same on every rank.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/timer.h"  // Clock

namespace dtrain::trace {

// One span: what it was (a timing phase, core/phase.h, or a region after the phases), when, and
// one number for the viewer (the epoch of an epoch span).
struct Event {
  int64_t begin_ns = 0, end_ns = 0;  // Clock's time since its epoch
  int32_t arg = 0;
  uint8_t what = 0;
};

class Recorder;

class ThreadTrack {
 public:
  static constexpr size_t kChunkEvents = size_t{1} << 14;
  static constexpr size_t kMaxChunks = 4096;  // 67 M spans a thread; beyond: counted, dropped

  ThreadTrack(Recorder& recorder, std::string name, int index, size_t reserve_events);
  ThreadTrack(const ThreadTrack&) = delete;
  ThreadTrack& operator=(const ThreadTrack&) = delete;

  // Owner thread only.
  void push(const Event& e);
  // Preallocates room for `events` spans in all. Only while the recorder is not recording.
  void reserve(size_t events);
  // Any thread; sees every span pushed before the recorder stopped recording.
  size_t size() const { return size_.load(std::memory_order_acquire); }
  const Event& operator[](size_t i) const { return chunks_[i / kChunkEvents][i % kChunkEvents]; }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  const std::string& name() const { return name_; }
  int index() const { return index_; }  // order of creation: the trace's thread id
  Recorder& recorder() const { return recorder_; }

 private:
  Recorder& recorder_;
  std::string name_;
  int index_;
  std::array<std::unique_ptr<Event[]>, kMaxChunks> chunks_;
  std::atomic<size_t> size_{0};
  std::atomic<uint64_t> dropped_{0};
};

class Recorder {
 public:
  // `reserve_events`: spans preallocated for each thread (more chunks come when needed).
  explicit Recorder(size_t reserve_events);
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // A new track named `name` (compute, comm, loader, ...). Rare: once a thread.
  ThreadTrack& add_track(std::string name);
  // Preallocates `events` spans for every track, present and future. Only while not recording.
  void reserve(size_t events);
  // Spans are kept only while recording (the output.trace window). Switching it on publishes
  // what reserve() allocated to the recording threads.
  void set_recording(bool on) { recording_.store(on, std::memory_order_release); }
  bool recording() const { return recording_.load(std::memory_order_acquire); }
  // Every track, in the order they were added. Read once the threads stopped recording.
  std::vector<const ThreadTrack*> tracks() const;

 private:
  size_t reserve_events_;
  std::atomic<bool> recording_{false};
  mutable std::mutex mutex_;
  std::deque<ThreadTrack> tracks_;  // a deque: tracks never move
};

namespace detail {
inline thread_local ThreadTrack* current_track = nullptr;
inline thread_local Recorder* current_recorder = nullptr;
}  // namespace detail

// The recorder the calling thread records into (null: tracing is off for it). A thread that
// starts another passes this to the new thread's ThreadScope.
inline Recorder* current_recorder() {
  return detail::current_recorder;
}

// A track named `name` in the calling thread's recorder, for a thread it is about to start (null
// when the calling thread records nothing).
inline ThreadTrack* new_track(std::string name) {
  Recorder* recorder = current_recorder();
  return recorder ? &recorder->add_track(std::move(name)) : nullptr;
}

// While it lives, the calling thread records into `track` (null: nothing), or into a new track
// of `recorder`; the threads it starts record into the same recorder.
class ThreadScope {
 public:
  explicit ThreadScope(ThreadTrack* track);
  ThreadScope(Recorder* recorder, std::string name)
      : ThreadScope(recorder ? &recorder->add_track(std::move(name)) : nullptr) {}
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  ThreadTrack* previous_track_;
  Recorder* previous_recorder_;
};

// Records a span of the calling thread (nothing when it has no track).
inline void record(uint8_t what, Clock::time_point begin, Clock::time_point end, int32_t arg = 0) {
  if (ThreadTrack* track = detail::current_track) {
    track->push({begin.time_since_epoch().count(), end.time_since_epoch().count(), arg, what});
  }
}

}  // namespace dtrain::trace
