// run.yaml, beside config.yaml: what really ran, as opposed to what was asked for — dtrain's
// version and git commit, when, how many ranks on which hosts, the backend `device: auto`
// picked, the communicator and the algorithm as they describe themselves.
#pragma once
#include <string>
#include <utility>  // pair
#include <vector>

#include "comm/comm.h"  // Comm: the hosts are gathered from every rank

namespace dtrain {

struct RunRecord {
  int world = 1;
  std::vector<std::string> hosts;  // of each rank
  std::string backend, comm, algorithm, train_data, test_data;
  std::vector<std::string> notes;  // stand-ins, settings without effect
  std::vector<int> local_ranks;    // of each rank: its position on its host (its GPU)
  // What `auto` settled on, as (key path, value) to paste back with --set to repeat the run.
  std::vector<std::pair<std::string, std::string>> resolved;
};

// dtrain's version and the commit it was built from ("0.1.0", "3f2a9c1d0e4b" + "-dirty").
std::string dtrain_version();
std::string dtrain_commit();
// Every rank's host name, in rank order, on every rank (a collective).
std::vector<std::string> gather_hosts(Comm& comm);
// Every rank's local rank (Comm::local_rank), in rank order, on every rank (a collective).
std::vector<int> gather_local_ranks(Comm& comm);
std::string run_record_yaml(const RunRecord& record);

}  // namespace dtrain
