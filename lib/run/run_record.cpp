#include "run/run_record.h"

#include <unistd.h>  // gethostname
#include <yaml-cpp/yaml.h>

#include <algorithm>  // any_of
#include <chrono>
#include <climits>  // HOST_NAME_MAX
#include <ctime>    // gmtime_r, strftime
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "dtrain_git_version.h"  // DTRAIN_GIT_COMMIT (generated at build time)
#include "run/checkpoint.h"      // newest_finished_checkpoint
#include "run/host_memory.h"     // peak_resident_bytes: a failing rank's own

#ifndef DTRAIN_VERSION
#define DTRAIN_VERSION "0.0.0"
#endif

namespace dtrain {

std::string dtrain_version() {
  return DTRAIN_VERSION;
}

std::string dtrain_commit() {
  return DTRAIN_GIT_COMMIT;
}

std::vector<std::string> gather_hosts(Comm& comm) {
  // Comm gathers rows of numbers: each rank's name, one character per entry.
  constexpr size_t kLength = 256;
  char name[kLength] = {};
  if (gethostname(name, kLength - 1) != 0) name[0] = '?';
  std::vector<double> row(comm.size() * kLength, 0.0);
  for (size_t i = 0; i < kLength && name[i]; ++i)
    row[comm.rank() * kLength + i] = static_cast<unsigned char>(name[i]);
  comm.allreduce_sum(row);
  std::vector<std::string> hosts(comm.size());
  for (int r = 0; r < comm.size(); ++r)
    for (size_t i = 0; i < kLength && row[r * kLength + i] != 0; ++i)
      hosts[r] += static_cast<char>(row[r * kLength + i]);
  return hosts;
}

std::vector<int> gather_local_ranks(Comm& comm) {
  std::vector<double> row(static_cast<size_t>(comm.size()), 0.0);
  row[static_cast<size_t>(comm.rank())] = comm.local_rank();
  comm.allreduce_sum(row);
  return {row.begin(), row.end()};
}

std::string run_record_yaml(const RunRecord& r) {
  char started[32];
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &utc);

  YAML::Node root(YAML::NodeType::Map);
  root["dtrain"]["version"] = dtrain_version();
  root["dtrain"]["commit"] = dtrain_commit();
  root["started"] = std::string(started);
  root["world_size"] = r.world;
  YAML::Node hosts(YAML::NodeType::Sequence);
  for (const auto& h : r.hosts) hosts.push_back(h);
  hosts.SetStyle(YAML::EmitterStyle::Flow);
  root["hosts"] = hosts;  // of rank 0, 1, ...
  if (!r.local_ranks.empty()) {
    YAML::Node local(YAML::NodeType::Sequence);
    for (int l : r.local_ranks) local.push_back(l);
    local.SetStyle(YAML::EmitterStyle::Flow);
    root["local_ranks"] = local;
  }
  root["backend"] = r.backend;
  root["comm"] = r.comm;
  root["algorithm"] = r.algorithm;
  root["train_data"] = r.train_data;
  root["test_data"] = r.test_data;
  if (!r.notes.empty()) root["notes"] = r.notes;

  YAML::Emitter out;
  out << root;
  return std::string("# what really ran (config.yaml is what was asked for)\n") + out.c_str() +
         "\n";
}

namespace {

// The line that starts the status block: what comes before it is the record.
constexpr const char* kStatusHeading =
    "# how the run ended: running, completed, stopped or failed\n";

}  // namespace

std::string run_status_yaml(const RunStatus& s) {
  YAML::Node root(YAML::NodeType::Map);
  root["status"] = s.state;
  if (!s.reason.empty()) root["reason"] = s.reason;
  YAML::Node last(YAML::NodeType::Map);
  last["epoch"] = s.epoch;
  last["iteration"] = s.iteration;
  last["iterations"] = s.iterations;
  last.SetStyle(YAML::EmitterStyle::Flow);
  root["last_iteration"] = last;
  root["checkpoint"] = s.checkpoint ? YAML::Node(*s.checkpoint) : YAML::Node(YAML::NodeType::Null);
  if (!s.resolved.empty()) {
    YAML::Node resolved(YAML::NodeType::Map);
    for (const auto& [key, value] : s.resolved) resolved[key] = value;
    root["resolved"] = resolved;
  }
  if (s.estimated_bytes > 0 || !s.peak_rss_bytes.empty()) {
    YAML::Node memory(YAML::NodeType::Map);
    if (s.estimated_bytes > 0) memory["estimated_bytes"] = s.estimated_bytes;
    auto list = [](const std::vector<int64_t>& values) {
      YAML::Node node(YAML::NodeType::Sequence);
      for (int64_t v : values) node.push_back(v >= 0 ? YAML::Node(v) : YAML::Node());
      node.SetStyle(YAML::EmitterStyle::Flow);
      return node;
    };
    if (!s.peak_rss_bytes.empty()) memory["peak_rss_bytes"] = list(s.peak_rss_bytes);
    if (std::ranges::any_of(s.peak_device_bytes, [](int64_t v) { return v > 0; }))
      memory["peak_device_bytes"] = list(s.peak_device_bytes);
    root["memory"] = memory;
  }
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);  // `checkpoint: null`, as a script greps it
  out << root;
  return std::string(kStatusHeading) +
         "# last_iteration: where the run was last counted (an epoch's end, a checkpoint, the "
         "stop):\n#   the epoch (1-based), the iteration within it, the iterations of the run\n"
         "# resolved: what `auto` settled on; pin these keys (--set KEY=VALUE) to repeat the "
         "run\n# memory: the memory table's estimate per rank; each rank's peak resident (and GPU) "
         "bytes\n" +
         out.c_str() + "\n";
}

void RunYamlFile::start(const std::string& record) {
  status_.checkpoint = newest_checkpoint();  // a resumed run's
  write(record, status_);
  arm(record);
}

void RunYamlFile::memory(int64_t estimated_bytes, int rank, int world) {
  status_.estimated_bytes = estimated_bytes;
  rank_ = rank, world_ = world;
}

void RunYamlFile::progress(int epoch, int64_t iteration, int64_t iterations) {
  status_.epoch = epoch, status_.iteration = iteration, status_.iterations = iterations;
}

void RunYamlFile::end(const std::string& state, const std::string& reason) noexcept {
  if (!armed_) return;
  try {
    std::ifstream in(dir_ + "/run.yaml");
    std::stringstream text;
    text << in.rdbuf();
    if (!in || !text.str().starts_with(record_ + kStatusHeading)) return;
    status_.state = state;
    status_.reason = reason;
    if (status_.peak_rss_bytes.empty()) {
      // Not gathered (a failure: the other ranks may be gone): this rank's own.
      status_.peak_rss_bytes.assign(world_, -1);
      status_.peak_device_bytes.assign(world_, -1);
      status_.peak_rss_bytes[rank_] = peak_resident_bytes();
      status_.peak_device_bytes[rank_] = own_device_peak_;
    }
    status_.checkpoint = newest_checkpoint();
    write(record_, status_);
  } catch (const std::exception&) {
    // The run's own outcome (its exit code, its message) matters more than its record.
  }
}

std::optional<std::string> RunYamlFile::newest_checkpoint() const {
  // Absolute: a job script reads it from wherever it runs.
  const auto found = newest_finished_checkpoint(dir_ + "/checkpoints");
  if (!found) return std::nullopt;
  return std::filesystem::absolute(*found).lexically_normal().string();
}

void RunYamlFile::write(const std::string& record, const RunStatus& status) const {
  namespace fs = std::filesystem;
  // Per process: two ranks ending the same run at once each rename a whole file.
  const fs::path path = fs::path(dir_) / "run.yaml";
  const fs::path temporary = fs::path(dir_) / (".run.yaml." + std::to_string(getpid()) + ".tmp");
  {
    std::ofstream out(temporary);
    out << record << run_status_yaml(status);
    out.close();
    if (!out) throw Error("cannot write " + temporary.string());
  }
  fs::rename(temporary, path);
}

}  // namespace dtrain
