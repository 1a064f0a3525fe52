// run.yaml, beside config.yaml: what really ran, as opposed to what was asked for — dtrain's
// version and git commit, when, how many ranks on which hosts, the backend `device: auto`
// picked, the communicator and the algorithm as they describe themselves.
#pragma once
#include <cstdint>
#include <optional>
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
};

// dtrain's version and the commit it was built from ("0.1.0", "3f2a9c1d0e4b" + "-dirty").
std::string dtrain_version();
std::string dtrain_commit();
// Every rank's host name, in rank order, on every rank (a collective).
std::vector<std::string> gather_hosts(Comm& comm);
// Every rank's local rank (Comm::local_rank), in rank order, on every rank (a collective).
std::vector<int> gather_local_ranks(Comm& comm);
std::string run_record_yaml(const RunRecord& record);

// run.yaml's last block: how the run ended, for job scripts (requeue on `status: stopped`).
struct RunStatus {
  std::string state = "running";  // running | completed | stopped | failed
  std::string reason;             // stopped: the signal (SIGTERM); failed: the error message
  // The last iteration done when the trainer last counted (an epoch's end, a checkpoint, the
  // stop; a failure inside an epoch leaves the count before it): its epoch (1-based), its
  // number within that epoch and the iterations of the whole run, in the scheduler's units
  // (train.max_iterations'); 0, 0, 0 before any.
  int epoch = 0;
  int64_t iteration = 0, iterations = 0;
  std::optional<std::string> checkpoint;  // the newest finished checkpoint's folder
  // What `auto` settled on so far, as (key path, value) to paste back with --set to repeat the
  // run (SAPipe's stale_layers appears once its profile has chosen).
  std::vector<std::pair<std::string, std::string>> resolved;
  // The memory table's total for the rank that holds most (0: none), and each rank's peak
  // resident memory (getrusage) and, on a GPU, its device memory's, in bytes, in rank order: -1
  // where not known (a failure reports its own rank's only); empty before the run ends.
  int64_t estimated_bytes = 0;
  std::vector<int64_t> peak_rss_bytes, peak_device_bytes;
};
std::string run_status_yaml(const RunStatus& status);

// run.yaml of one run: the record, then the status block, replaced each time the status
// changes. Every write goes to a temporary file in the same folder, then renamed over run.yaml:
// a job script never reads half a file.
class RunYamlFile {
 public:
  explicit RunYamlFile(std::string dir) : dir_(std::move(dir)) {}
  // Rank 0, when the run starts: the record and `status: running`.
  void start(const std::string& record);
  // Every rank, once rank 0 has started: its `record` (rank 0's, passed on). From here this
  // rank may end the status (see main's failure path).
  void arm(const std::string& record) { record_ = record, armed_ = true; }
  const std::string& record() const { return record_; }
  // Where training is: every rank keeps it, for whichever rank writes the end.
  void progress(int epoch, int64_t iteration, int64_t iterations);
  // What `auto` settled on, as known now (written with the status).
  void resolved(std::vector<std::pair<std::string, std::string>> settings) {
    status_.resolved = std::move(settings);
  }
  // The memory table's total, and this process's rank among `world`: what a failure's end
  // reports of its own rank.
  void memory(int64_t estimated_bytes, int rank, int world);
  // This rank's device peak so far (0 on the CPU), for a failure's end: set when the backend
  // goes (the trainer's end), since a failure is reported after it.
  void own_device_peak(int64_t bytes) { own_device_peak_ = bytes; }
  // Every rank's peaks, gathered (a collective's result) before a completed or stopped end.
  void peak_memory(std::vector<int64_t> rss, std::vector<int64_t> device) {
    status_.peak_rss_bytes = std::move(rss), status_.peak_device_bytes = std::move(device);
  }
  // Replaces the status block: `state` and `reason`, the last iteration, the newest finished
  // checkpoint in DIR/checkpoints. Nothing before arm(), or where run.yaml does not begin with
  // this run's record (a rank on another host whose output folder, on its local disk, holds no
  // run.yaml or another run's); never throws.
  void end(const std::string& state, const std::string& reason) noexcept;

 private:
  void write(const std::string& record, const RunStatus& status) const;
  std::optional<std::string> newest_checkpoint() const;
  std::string dir_;
  std::string record_;
  bool armed_ = false;
  RunStatus status_;
  int rank_ = 0, world_ = 1;
  int64_t own_device_peak_ = 0;
};

}  // namespace dtrain
