// run.yaml's status block (job scripts read it to requeue a stopped run), the output folder's
// ways out (--resume only where a finished checkpoint is) and the progress line's ETA after a
// resume (only what is left).
#include <doctest/doctest.h>
#include <unistd.h>  // getpid: a scratch folder per test process
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"  // InputError
#include "run/output_dir.h"
#include "run/progress.h"
#include "run/run_record.h"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

// A fresh, empty folder of this test process, removed when the test ends.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name)
      : dir(fs::temp_directory_path() /
            ("dtrain_run_status_" + name + "_" + std::to_string(getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void touch(const fs::path& path, const std::string& text = "x\n") {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// The message of the InputError that claiming `dir` for a fresh run throws; empty if none.
std::string refusal(const fs::path& dir) {
  try {
    claim_output_dir(dir.string(), OutputMode::fresh, false);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string run_yaml_record_of_another_run() {
  RunRecord record;
  record.world = 2;
  return run_record_yaml(record);
}

}  // namespace

TEST_CASE("run.yaml: the record stays, the status block is replaced") {
  Scratch s("record");
  RunRecord record;
  record.hosts = {"a"};
  record.backend = "cpu";
  RunYamlFile file(s.dir.string());
  file.progress(1, 3, 3);
  file.start(run_record_yaml(record));
  YAML::Node y = YAML::LoadFile((s.dir / "run.yaml").string());
  CHECK(y["status"].as<std::string>() == "running");
  CHECK(y["world_size"].as<int>() == 1);
  CHECK(y["backend"].as<std::string>() == "cpu");
  CHECK(y["checkpoint"].IsNull());
  CHECK_FALSE(y["reason"]);

  // A finished checkpoint (its manifest) and an unfinished, newer one: the finished one.
  touch(s.dir / "checkpoints/epoch-0002/manifest.yaml", "epoch: 2\niteration: 0\n");
  touch(s.dir / "checkpoints/epoch-0003/rank-00000.bin.tmp");
  file.progress(3, 7, 39);
  file.end("failed", "training diverged: the loss is nan: \"quoted\"");
  y = YAML::LoadFile((s.dir / "run.yaml").string());
  CHECK(y["status"].as<std::string>() == "failed");
  CHECK(y["reason"].as<std::string>() == "training diverged: the loss is nan: \"quoted\"");
  CHECK(y["last_iteration"]["epoch"].as<int>() == 3);
  CHECK(y["last_iteration"]["iteration"].as<int>() == 7);
  CHECK(y["last_iteration"]["iterations"].as<int>() == 39);
  CHECK(y["checkpoint"].as<std::string>() ==
        fs::absolute(s.dir / "checkpoints/epoch-0002").lexically_normal().string());
  CHECK(y["world_size"].as<int>() == 1);
  // Once: a second end replaces the block rather than adding one.
  file.end("stopped", "SIGTERM");
  const std::string text = read(s.dir / "run.yaml");
  CHECK(text.find("status:") == text.rfind("status:"));
  CHECK(YAML::Load(text)["reason"].as<std::string>() == "SIGTERM");
  // Another rank, given rank 0's record, ends it too.
  RunYamlFile rank1(s.dir.string());
  rank1.arm(file.record());
  rank1.end("failed", "rank 1's error");
  CHECK(YAML::LoadFile((s.dir / "run.yaml").string())["reason"].as<std::string>() ==
        "rank 1's error");
  CHECK(YAML::LoadFile((s.dir / "run.yaml").string())["world_size"].as<int>() == 1);
  // No temporary file is left beside it.
  for (const auto& entry : fs::directory_iterator(s.dir))
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("run.yaml: a process that did not start this run leaves run.yaml alone") {
  Scratch s("unarmed");
  touch(s.dir / "run.yaml", "world_size: 2\nstatus: completed\n");
  RunYamlFile earlier_run(s.dir.string());  // a resume that failed before it started
  earlier_run.end("failed", "no intact checkpoint");
  CHECK(read(s.dir / "run.yaml") == "world_size: 2\nstatus: completed\n");
  // Armed with this run's record, but run.yaml is another run's (a rank on a host whose local
  // output folder held an earlier run): left alone.
  RunYamlFile other_host(s.dir.string());
  other_host.arm(run_yaml_record_of_another_run());
  other_host.end("failed", "boom");
  CHECK(read(s.dir / "run.yaml") == "world_size: 2\nstatus: completed\n");
  // Armed on a host that does not see the folder: nothing, no exception.
  RunYamlFile elsewhere((s.dir / "not_here").string());
  elsewhere.arm(run_yaml_record_of_another_run());
  elsewhere.end("failed", "boom");
  CHECK_FALSE(fs::exists(s.dir / "not_here"));
}

TEST_CASE("output folder: --resume is suggested only where a finished checkpoint is") {
  Scratch s("suggest");
  CHECK(refusal(s.dir).empty());
  touch(s.dir / "accuracy.csv");
  std::string message = refusal(s.dir);
  CHECK(message.find("no checkpoint to continue from: write elsewhere with --out DIR, or "
                     "replace it with --overwrite") != std::string::npos);
  CHECK(message.find("--resume") == std::string::npos);
  // An unfinished checkpoint (no manifest) is not one to continue from.
  touch(s.dir / "checkpoints/epoch-0001/rank-00000.bin.tmp");
  CHECK(refusal(s.dir).find("--resume") == std::string::npos);
  touch(s.dir / "checkpoints/epoch-0001/manifest.yaml", "epoch: 1\niteration: 0\n");
  message = refusal(s.dir);
  CHECK(message.find("continue it with --resume " + s.dir.string() +
                     ", write elsewhere with --out DIR, or replace it with --overwrite") !=
        std::string::npos);
}

TEST_CASE("progress: the ETA counts only what is left") {
  CHECK(eta_seconds(10.0, 5, 15) == doctest::Approx(30.0));
  CHECK(eta_seconds(10.0, 5, 0) == 0.0);
  CHECK(eta_seconds(10.0, 0, 15) < 0);  // nothing known yet: shown as --:--

  // 4 epochs of 10 iterations; resumed in the middle of epoch 3 (2.5 epochs done).
  Progress fresh(ProgressMode::none, 4, 10, 0, 0);
  CHECK(fresh.iterations_left() == 40);
  Progress resumed(ProgressMode::none, 4, 10, 0, 0);
  resumed.resume_at(2.5);
  CHECK(resumed.iterations_left() == 15);
  for (int i = 1; i <= 5; ++i) resumed.iteration({2, 5 + i, 0.5, 32});
  CHECK(resumed.iterations_left() == 10);
  // 5 iterations in 10 s since the resume: 10 more take 20 s (not the 35 of a fresh count).
  CHECK(eta_seconds(10.0, 5, resumed.iterations_left()) == doctest::Approx(20.0));
  // train.max_iterations bounds the run: 25 of them, 20 done before.
  Progress budget(ProgressMode::none, 4, 10, 25, 0);
  budget.resume_at(2.0);
  CHECK(budget.iterations_left() == 5);
}
