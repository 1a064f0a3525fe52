#include "run/run_record.h"

#include <unistd.h>  // gethostname
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <climits>  // HOST_NAME_MAX
#include <ctime>    // gmtime_r, strftime

#include "dtrain_git_version.h"  // DTRAIN_GIT_COMMIT (generated at build time)

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
  if (!r.resolved.empty()) {
    YAML::Node resolved(YAML::NodeType::Map);
    for (const auto& [key, value] : r.resolved) resolved[key] = value;
    root["resolved"] = resolved;
  }
  YAML::Emitter out;
  out << root;
  return std::string("# what really ran (config.yaml is what was asked for)\n") + out.c_str() +
         "\n";
}

}  // namespace dtrain
