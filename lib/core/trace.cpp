#include "core/trace.h"

#include <algorithm>  // min, max
#include <new>        // nothrow

#include "core/error.h"  // DTRAIN_CHECK

namespace dtrain::trace {

static_assert(std::is_same_v<Clock::duration, std::chrono::nanoseconds>,
              "trace events count Clock ticks as nanoseconds");

ThreadTrack::ThreadTrack(Recorder& recorder, std::string name, int index, size_t reserve_events)
    : recorder_(recorder), name_(std::move(name)), index_(index) {
  reserve(reserve_events);
}

void ThreadTrack::reserve(size_t events) {
  const size_t chunks = std::min(kMaxChunks, (events + kChunkEvents - 1) / kChunkEvents);
  for (size_t c = 0; c < std::max<size_t>(chunks, 1); ++c)
    if (!chunks_[c]) chunks_[c] = std::make_unique<Event[]>(kChunkEvents);
}

void ThreadTrack::push(const Event& e) {
  if (!recorder_.recording()) return;
  const size_t n = size_.load(std::memory_order_relaxed);
  const size_t chunk = n / kChunkEvents;
  // Beyond the reservation: one more chunk (push runs in timers' destructors, so it must not
  // throw; without memory the span is counted as dropped).
  if (chunk < kMaxChunks && !chunks_[chunk])
    chunks_[chunk].reset(new (std::nothrow) Event[kChunkEvents]);
  if (chunk >= kMaxChunks || !chunks_[chunk]) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  chunks_[chunk][n % kChunkEvents] = e;
  size_.store(n + 1, std::memory_order_release);  // publishes the event (and its chunk)
}

Recorder::Recorder(size_t reserve_events) : reserve_events_(reserve_events) {}

ThreadTrack& Recorder::add_track(std::string name) {
  std::lock_guard lock(mutex_);
  const int index = static_cast<int>(tracks_.size());
  return tracks_.emplace_back(*this, std::move(name), index, reserve_events_);
}

void Recorder::reserve(size_t events) {
  DTRAIN_CHECK(!recording()) << "trace::Recorder::reserve while recording";
  std::lock_guard lock(mutex_);
  reserve_events_ = events;
  for (ThreadTrack& t : tracks_) t.reserve(events);
}

std::vector<const ThreadTrack*> Recorder::tracks() const {
  std::lock_guard lock(mutex_);
  std::vector<const ThreadTrack*> out;
  for (const ThreadTrack& t : tracks_) out.push_back(&t);
  return out;
}

ThreadScope::ThreadScope(ThreadTrack* track)
    : previous_track_(detail::current_track), previous_recorder_(detail::current_recorder) {
  if (!track) return;
  detail::current_track = track;
  detail::current_recorder = &track->recorder();
}

ThreadScope::~ThreadScope() {
  detail::current_track = previous_track_;
  detail::current_recorder = previous_recorder_;
}

}  // namespace dtrain::trace
