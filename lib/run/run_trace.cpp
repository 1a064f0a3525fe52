#include "run/run_trace.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join
#include <unistd.h>      // gethostname

#include <algorithm>  // min, max
#include <fstream>
#include <limits>

#include "comm/tags.h"       // kClock, kTrace
#include "core/error.h"      // Error
#include "core/phase.h"      // trace_name, kPhaseCount
#include "run/run_record.h"  // dtrain_version, dtrain_commit

namespace dtrain {
namespace {

int64_t now_ns() {
  return Clock::now().time_since_epoch().count();
}

// Spans preallocated per thread: ~16 a thread per iteration of the window (a compute thread
// records 5–8, a comm thread one per request plus the codec's), capped; more chunks come on
// demand.
size_t reserve_events(const TraceConfig& c, int epochs, int64_t per_epoch, int64_t max_iters) {
  int64_t iterations = epochs * per_epoch;
  if (max_iters > 0) iterations = std::min(iterations, max_iters);
  if (c.epochs.size() == 2) iterations = int64_t{c.epochs[1] - c.epochs[0] + 1} * per_epoch;
  if (c.iterations.size() == 2) iterations = c.iterations[1] - c.iterations[0] + 1;
  iterations = std::clamp<int64_t>(iterations, 0, 1 << 14);  // 16 per: 256 K spans at most
  return static_cast<size_t>(16 * iterations + 1024);
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

}  // namespace

// Cristian's algorithm against rank 0: the round trip with the least delay bounds the error by
// half of it. Rank 0 answers each rank in turn.
int64_t measure_clock_offset(Comm& comm, const std::function<int64_t()>& clock) {
  constexpr int kRounds = 8;
  if (comm.rank() == 0) {
    for (int peer = 1; peer < comm.size(); ++peer)
      for (int round = 0; round < kRounds; ++round) {
        int64_t ping = 0;
        comm.recv(&ping, sizeof ping, peer, tags::kClock);
        const int64_t t = clock();
        comm.send(&t, sizeof t, peer, tags::kClock);
      }
    return 0;
  }
  int64_t best_delay = std::numeric_limits<int64_t>::max(), offset = 0;
  for (int round = 0; round < kRounds; ++round) {
    const int64_t sent = clock();
    comm.send(&sent, sizeof sent, 0, tags::kClock);
    int64_t remote = 0;
    comm.recv(&remote, sizeof remote, 0, tags::kClock);
    const int64_t received = clock();
    if (received - sent < best_delay) {
      best_delay = received - sent;
      offset = remote - (sent + (received - sent) / 2);
    }
  }
  return offset;
}

namespace {

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
      continue;
    }
    out += c;
  }
  out += '"';
}

std::string quoted(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

// Microseconds with nanosecond digits, exactly (no double rounding): nesting in nanoseconds
// stays nesting in the file.
std::string micros(int64_t ns) {
  const bool negative = ns < 0;
  const uint64_t magnitude = negative ? -static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return fmt::format("{}{}.{:03}", negative ? "-" : "", magnitude / 1000, magnitude % 1000);
}

}  // namespace

RunTrace::RunTrace(const TraceConfig& config) : config_(config), recorder_(1024) {
  compute_.emplace(&recorder_, "compute");
}

void RunTrace::reserve(int epochs, int64_t iterations_per_epoch, int64_t max_iterations) {
  recorder_.reserve(reserve_events(config_, epochs, iterations_per_epoch, max_iterations));
}

void RunTrace::align_clocks(Comm& training_comm) {
  Comm& comm = training_comm.unpaced();
  offset_ns_ = comm.size() > 1 ? measure_clock_offset(comm, now_ns) : 0;
  std::string origin = std::to_string(now_ns());  // rank 0's is the file's time 0
  comm.broadcast(origin, 0);
  origin_ns_ = std::stoll(origin);
}

bool RunTrace::in_iteration_window(int64_t iteration) const {
  return iteration >= config_.iterations[0] && iteration <= config_.iterations[1];
}

void RunTrace::epoch_starts(int epoch) {
  if (config_.iterations.size() == 2)
    recorder_.set_recording(in_iteration_window(iterations_ + 1));
  else if (config_.epochs.size() == 2)
    recorder_.set_recording(epoch + 1 >= config_.epochs[0] && epoch + 1 <= config_.epochs[1]);
  else
    recorder_.set_recording(true);
}

void RunTrace::iteration_done() {
  ++iterations_;
  if (config_.iterations.size() == 2) recorder_.set_recording(in_iteration_window(iterations_ + 1));
}

void for_each_events_piece(const trace::Recorder& recorder, int rank, const std::string& host,
                           int64_t offset_ns, int64_t origin_ns,
                           const std::function<void(const std::string&)>& emit) {
  constexpr size_t kPieceBytes = size_t{4} << 20;
  std::string out;
  out.reserve(kPieceBytes + 4096);
  auto flush_when_full = [&] {
    if (out.size() < kPieceBytes) return;
    emit(out);
    out.clear();
  };
  out += fmt::format(
      "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{0},\"tid\":0,"
      "\"args\":{{\"name\":{1}}}}},\n"
      "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{0},\"tid\":0,"
      "\"args\":{{\"sort_index\":{0}}}}},\n",
      rank, quoted(fmt::format("rank {} ({})", rank, host)));
  for (const trace::ThreadTrack* track : recorder.tracks()) {
    const int tid = track->index() + 1;
    out += fmt::format(
        "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{0},\"tid\":{1},"
        "\"args\":{{\"name\":{2}}}}},\n"
        "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{0},\"tid\":{1},"
        "\"args\":{{\"sort_index\":{1}}}}},\n",
        rank, tid, quoted(track->name()));
    const size_t n = track->size();
    for (size_t i = 0; i < n; ++i) {
      const trace::Event& e = (*track)[i];
      const bool region = e.what >= kPhaseCount;
      out += fmt::format(
          "{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{},"
          "\"dur\":{}",
          trace_name(e.what), region ? "region" : "phase", rank, tid,
          micros(e.begin_ns + offset_ns - origin_ns), micros(e.end_ns - e.begin_ns));
      if (e.what == trace_code(Region::epoch))
        out += fmt::format(",\"args\":{{\"epoch\":{}}}", e.arg);
      out += "},\n";
      flush_when_full();
    }
    if (track->dropped() > 0)
      out += fmt::format(
          "{{\"name\":\"spans dropped: {}\",\"ph\":\"i\",\"s\":\"t\",\"pid\":{},\"tid\":{},"
          "\"ts\":0}},\n",
          track->dropped(), rank, tid);
  }
  if (!out.empty()) emit(out);
}

std::string trace_events_json(const trace::Recorder& recorder, int rank, const std::string& host,
                              int64_t offset_ns, int64_t origin_ns) {
  std::string all;
  for_each_events_piece(recorder, rank, host, offset_ns, origin_ns,
                        [&all](const std::string& piece) { all += piece; });
  return all;
}

void RunTrace::write(Comm& training_comm, const std::string& path) {
  recorder_.set_recording(false);
  Comm& comm = training_comm.unpaced();  // the file's bytes are not training traffic
  const auto offsets = comm.gather({static_cast<double>(offset_ns_)}, 0);
  const std::string host = host_name();
  // Each rank's events travel in pieces of a few MB, each after its length; length 0 ends them.
  if (comm.rank() != 0) {
    auto send = [&comm](const std::string& piece) {
      const uint64_t bytes = piece.size();
      comm.send(&bytes, sizeof bytes, 0, tags::kTrace);
      if (bytes > 0) comm.send(piece.data(), piece.size(), 0, tags::kTrace);
    };
    for_each_events_piece(recorder_, comm.rank(), host, offset_ns_, origin_ns_, send);
    send(std::string());
    return;
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << "{\"traceEvents\":[\n";
  for_each_events_piece(recorder_, 0, host, offset_ns_, origin_ns_,
                        [&file](const std::string& piece) { file << piece; });
  std::string piece;
  for (int peer = 1; peer < comm.size(); ++peer) {
    for (;;) {
      uint64_t bytes = 0;
      comm.recv(&bytes, sizeof bytes, peer, tags::kTrace);
      if (bytes == 0) break;
      piece.resize(bytes);
      comm.recv(piece.data(), piece.size(), peer, tags::kTrace);
      file << piece;
    }
  }
  // The last event has no comma after it: an instant that marks the end of the trace.
  std::vector<std::string> offsets_us;
  for (const auto& row : offsets) offsets_us.push_back(micros(static_cast<int64_t>(row[0])));
  file << fmt::format(
      "{{\"name\":\"end\",\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":1,\"ts\":{}}}\n],\n"
      "\"displayTimeUnit\":\"ms\",\n\"otherData\":{{\"dtrain\":{},\"ranks\":{},"
      "\"clock_offsets_us\":[{}]}}}}\n",
      micros(now_ns() - origin_ns_), quoted(dtrain_version() + " " + dtrain_commit()), comm.size(),
      fmt::join(offsets_us, ","));
  file.close();
  if (!file) throw Error("cannot write " + path);
}

}  // namespace dtrain
