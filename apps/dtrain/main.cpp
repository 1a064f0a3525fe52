// dtrain: command-line parsing and the mapping of errors to exit codes; nothing else.
//   0 success · 1 runtime failure · 2 bad usage, bad config or bad input file
#include <fmt/format.h>     // the banner
#include <spdlog/spdlog.h>  // logging set-up

#include <CLI/CLI.hpp>  // command line
#include <algorithm>    // max
#include <chrono>       // a rank's error waits for rank 0's
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>  // --progress modes
#include <memory>
#include <sstream>  // the plan's output on ranks other than 0
#include <thread>

#include "comm/allreduce_bench.h"   // dtrain bench comm
#include "comm/comm.h"              // make_local_comm
#include "comm/mpi_comm.h"          // launched_under_mpi, init_mpi, make_mpi_comm
#include "comm/wait_watchdog.h"     // start_wait_watchdog: cluster.timeout_s
#include "compress/codec.h"         // make_codec: validate --codecs
#include "core/cpu_policy.h"        // flush_denormals, run_as_compute_thread
#include "core/error.h"             // Error, InputError
#include "core/stop_request.h"      // install_stop_handlers
#include "nn/graph.h"               // --profile-layers
#include "nn/spec.h"                // model_help: --help
#include "optim/optimizer_table.h"  // optimizers_help: --help
#include "run/config.h"             // load_config, config_reference
#include "run/eval_command.h"       // dtrain eval
#include "run/plan_command.h"       // dtrain plan
#include "run/rank_checks.h"        // --dry-run --ranks: check_world, no_effect_settings
#include "run/run_builder.h"        // configure_comm: cluster.link emulation
#include "run/run_record.h"         // dtrain_version, dtrain_commit
#include "run/trainer.h"            // Trainer
#include "sched/algorithm.h"        // algorithm_names, algorithms_help: --help

namespace {

struct Options {
  std::string config;
  std::vector<std::string> overrides;
  std::string out;
  std::string resume;  // --resume DIR
  bool overwrite = false;
  bool dry_run = false;
  bool profile_layers = false;
  int ranks = 0;  // dtrain plan --ranks
  // dtrain --dry-run --ranks: the job its rank-dependent keys are checked for (0: unknown).
  int dry_run_ranks = 0;
  std::string csv;
  std::string write_profile, profile;  // dtrain plan
  std::string weights;                 // dtrain eval
  dtrain::ProgressMode progress = dtrain::ProgressMode::auto_;
};

// Every blocking wait on another rank is bounded (cluster.timeout_s): past it the job ends.
void watch_waits(double timeout_s, dtrain::Comm& comm) {
  if (comm.size() > 1)
    dtrain::start_wait_watchdog({timeout_s, comm.rank(), [&comm] { comm.abort(1); }});
}

// A warning, on stderr beside the errors (rank 0's only: one line, not one per rank).
void warn(const std::string& text) {
  std::cerr << "dtrain: warning: " << text << "\n";
}

// Loads the experiment; rank 0 prints the warnings (settings that will have no effect).
dtrain::ExperimentConfig load(const Options& o, const dtrain::Comm& comm) {
  dtrain::ConfigSources sources;
  sources.path = o.config;
  sources.overrides = o.overrides;
  if (!o.out.empty()) sources.output_dir = o.out;
  if (!o.resume.empty()) sources.output_dir = o.resume;  // the run continues in its own folder
  dtrain::ExperimentConfig config = dtrain::load_config(sources);
  if (comm.rank() == 0)
    for (const auto& w : config.warnings) warn(w);
  return config;
}

// Under mpirun every rank runs this; one rank's failure ends them all (MPI_Abort) so that no
// rank waits forever for a dead peer. `run_yaml`: the run's status, for main's failure path.
int train(const Options& o, std::unique_ptr<dtrain::Comm>& comm,
          std::shared_ptr<dtrain::RunYamlFile>& run_yaml) {
  const dtrain::ExperimentConfig config = load(o, *comm);
  comm = dtrain::configure_comm(config, std::move(comm));  // network emulation, when asked for
  watch_waits(config.cluster.timeout_s, *comm);
  // A dry run in one process checks what depends on the ranks for --ranks N, or notes it did not;
  // under mpirun the job's own ranks decide, as in training.
  const bool alone = o.dry_run && comm->size() == 1 && !dtrain::launched_under_mpi();
  DTRAIN_INPUT_CHECK(o.dry_run_ranks == 0 || alone)
      << "--ranks: for a dry run in one process; under mpirun the job's " << comm->size()
      << " rank(s) are checked";
  std::string unchecked;
  if (alone && o.dry_run_ranks > 0) dtrain::check_world(config, o.dry_run_ranks);
  if (alone && o.dry_run_ranks == 0)
    for (const auto& n : dtrain::unchecked_on_one_rank(config)) unchecked += "note     " + n + "\n";
  // Alone, what the one rank built lacks no effect for want of ranks: --ranks N's say (or none).
  const std::vector<std::string> for_want_of_ranks =
      alone ? dtrain::no_effect_settings(config, 1) : std::vector<std::string>{};
  if (alone && o.dry_run_ranks > 0 && comm->rank() == 0)
    for (const auto& w : dtrain::no_effect_settings(config, o.dry_run_ranks)) warn(w);
  if (o.dry_run && comm->size() == 1) {
    // A pipeline on one process: show what each of its ranks would hold and do.
    const std::string preview = dtrain::preview_model_parallel(config);
    if (!preview.empty()) {
      std::cout << dtrain::to_table(config) << "\n" << unchecked << preview << std::flush;
      return 0;
    }
  }
  // --dry-run shows every model, also of datasets not on this machine (a stand-in of the shape).
  const dtrain::OutputMode output = !o.resume.empty() ? dtrain::OutputMode::resume
                                    : o.overwrite     ? dtrain::OutputMode::overwrite
                                                      : dtrain::OutputMode::fresh;
  dtrain::TrainerOptions options{
      o.dry_run ? dtrain::DataFiles::stand_in_when_missing : dtrain::DataFiles::required,
      o.progress, output, /*check_ranks=*/!alone};
  options.dry_run = o.dry_run;
  options.memory_ranks = alone ? std::max(o.dry_run_ranks, 1) : 0;
  options.memory_ranks_known = !alone || o.dry_run_ranks > 0;
  dtrain::Trainer trainer(config, *comm, options);
  if (comm->rank() == 0) {
    for (const auto& w : trainer.no_effect())
      if (std::ranges::find(for_want_of_ranks, w) == for_want_of_ranks.end()) warn(w);
    std::cout << unchecked << trainer.describe() << std::flush;
    if (!trainer.built()) return 0;  // a dry run: the table says why
  }
  if (o.dry_run) return 0;
  run_yaml = trainer.run_yaml();
  trainer.model().graph().profile_layers(o.profile_layers);
  try {
    trainer.run();
    if (o.profile_layers && comm->rank() == 0)
      std::cout << "layer profile (training steps, rank 0):\n"
                << trainer.model().graph().layer_profile() << std::flush;
  } catch (const dtrain::Stopped& s) {
    if (comm->rank() == 0) spdlog::warn("{} ({})", s.message, dtrain::signal_name(s.signal));
    return 128 + s.signal;
  }
  return 0;
}

int bench_comm_main(const dtrain::AllreduceBenchOptions& options, const std::string& csv,
                    dtrain::Comm& comm) {
  for (const auto& c : options.codecs) dtrain::make_codec(c);  // unknown names: exit 2 now
  const auto rows = dtrain::run_allreduce_bench(comm, options);
  if (comm.rank() != 0) return 0;
  std::cout << "# all-reduce over " << comm.size() << " rank(s) (" << comm.name()
            << "); time averaged over ranks; busbw = algbw * 2(p-1)/p\n"
            << dtrain::allreduce_bench_table(rows);
  if (!csv.empty()) {
    std::ofstream out(csv);
    out << dtrain::allreduce_bench_csv(rows);
    if (!out) throw dtrain::Error("cannot write " + csv);
  }
  return 0;
}

// Every rank profiles (under mpirun they share the machine as training would); rank 0 prints.
// Without --ranks it predicts for the mpirun world, or for 2 ranks.
// With --profile and no --config, the defaults (and --set) give the link and pipedream's keys
// (profile_plan_config).
int plan_main(const Options& o, bool ranks_given, dtrain::Comm& comm) {
  if (o.config.empty() && o.profile.empty())
    throw dtrain::InputError("dtrain plan: --config FILE is required (or --profile P.csv)");
  const dtrain::ExperimentConfig config =
      o.config.empty() ? dtrain::profile_plan_config(o.profile, o.overrides) : load(o, comm);
  dtrain::PlanOptions options;
  options.ranks = ranks_given ? o.ranks : std::max(comm.size(), 2);
  options.profile = o.profile;
  if (comm.rank() == 0) options.csv = o.csv, options.write_profile = o.write_profile;
  std::ostringstream quiet;
  dtrain::run_plan(config, options, comm.rank() == 0 ? std::cout : quiet);
  return 0;
}

// One process evaluates (under mpirun every rank would do the same work: rank 0 prints).
int eval_main(const Options& o, const dtrain::Comm& comm) {
  const dtrain::ExperimentConfig config = load(o, comm);
  const dtrain::EvalReport report = dtrain::evaluate_weights(config, o.weights);
  if (comm.rank() == 0) std::cout << dtrain::eval_line(report) << "\n" << std::flush;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts, so that every thread inherits both (core/cpu_policy.h).
  dtrain::flush_denormals();
  dtrain::run_as_compute_thread();
  spdlog::set_pattern("%H:%M:%S %v");
  CLI::App app{fmt::format("dtrain: distributed deep-net training on one engine; this build "
                           "trains with {}",
                           fmt::join(dtrain::algorithm_names(), ", ")),
               "dtrain"};
  app.set_version_flag("--version",
                       "dtrain " + dtrain::dtrain_version() + " (" + dtrain::dtrain_commit() + ")");
  app.footer("\n" + dtrain::algorithms_help() + "\n" + dtrain::optimizers_help() + "\n" +
             dtrain::model_help() +
             "\nEvery key of an experiment file, with its default: dtrain keys");
  Options o;
  auto add_config_options = [&o](CLI::App* cmd, bool required) {
    auto* c = cmd->add_option("--config", o.config, "experiment YAML file");
    if (required) c->required();
    cmd->add_option("--set", o.overrides, "override a key by its dotted path, e.g. train.epochs=1")
        ->type_name("KEY=VALUE")
        ->allow_extra_args(false);
  };
  add_config_options(&app, false);
  auto* out_opt = app.add_option("--out", o.out, "output directory (overrides output.dir)");
  app.add_option("--resume", o.resume,
                 "continue the run whose output folder is DIR from its newest intact checkpoint")
      ->type_name("DIR")
      ->excludes(out_opt);
  app.add_flag("--overwrite", o.overwrite,
               "replace the results already in the output folder (otherwise refused)")
      ->excludes("--resume");
  auto* dry_run_opt = app.add_flag("--dry-run", o.dry_run,
                                   "validate the config, build the model, print both and exit");
  app.add_option("--ranks", o.dry_run_ranks,
                 "with --dry-run in one process: check the keys that depend on the number of "
                 "ranks (cluster.stragglers, the batch's split) for a job of N ranks")
      ->type_name("N")
      ->check(CLI::PositiveNumber)
      ->needs(dry_run_opt);
  app.add_flag("--profile-layers", o.profile_layers,
               "time every layer's forward and backward (the backend synchronised around each: "
               "a little slower) and print where the training time went");
  const std::map<std::string, dtrain::ProgressMode> progress_modes{
      {"auto", dtrain::ProgressMode::auto_},
      {"bar", dtrain::ProgressMode::bar},
      {"log", dtrain::ProgressMode::log},
      {"none", dtrain::ProgressMode::none}};
  app.add_option("--progress", o.progress,
                 "bar: one live line; log: a line every train.log_every_iterations; none; auto "
                 "(default): bar when the output (mpirun's, under mpirun) is a terminal")
      // Only the values in the help, not the transformer's mapping of them to numbers.
      ->transform(CLI::CheckedTransformer(progress_modes, CLI::ignore_case).description(""))
      ->type_name("auto|bar|log|none");

  // A subcommand inherits its parent's footer (the algorithms and models): each says its own.
  CLI::App* plan = app.add_subcommand("plan", "profile the model and predict iteration times");
  plan->footer(
      "\nIt predicts for every algorithm (dtrain --help lists them); every key of the "
      "--config file, with its default: dtrain keys");
  add_config_options(plan, false);
  auto* ranks_opt =
      plan->add_option("--ranks", o.ranks, "ranks to predict for (default: mpirun's, or 2)");
  plan->add_option("--csv", o.csv, "write the predictions as CSV");
  plan->add_option("--write-profile", o.write_profile,
                   "also write PipeDream's layer profile of the model (CSV)");
  plan->add_option("--profile", o.profile,
                   "plan PipeDream from this layer profile (of --write-profile), without the "
                   "model: needs cluster.link (--set cluster.link.bandwidth=25Gbps)");
  CLI::App* eval = app.add_subcommand(
      "eval", "evaluate a weights file (a run's model.safetensors) on the config's test split");
  add_config_options(eval, true);
  eval->add_option("--weights", o.weights, "the weights (safetensors) of the config's model")
      ->required()
      ->type_name("FILE");
  eval->footer("");
  CLI::App* keys = app.add_subcommand("keys",
                                      "print every key of an experiment file as a Markdown table "
                                      "(docs/configuration.md's reference)");
  keys->footer("");
  CLI::App* bench = app.add_subcommand("bench", "communication benchmarks");
  bench->footer("");
  CLI::App* bench_comm =
      bench->add_subcommand("comm", "all-reduce bandwidth table (nccl-tests style)");
  dtrain::AllreduceBenchOptions bench_opts;
  bool no_mpi = false;
  bench_comm->add_option("--min-bytes", bench_opts.min_bytes, "smallest message (4K, 1M, ...)")
      ->transform(CLI::AsSizeValue(false));
  bench_comm->add_option("--max-bytes", bench_opts.max_bytes, "largest message")
      ->transform(CLI::AsSizeValue(false));
  bench_comm->add_option("--codecs", bench_opts.codecs, "codecs for the ring all-reduce")
      ->delimiter(',');
  bench_comm->add_flag("--no-mpi", no_mpi, "skip MPI_Allreduce");
  bench_comm->add_option("--iters", bench_opts.iterations, "timed iterations (0: automatic)");
  bench_comm->add_option("--csv", o.csv, "write the rows as CSV");
  bench_comm->footer(
      "\nUnder mpirun every rank takes part; the codecs: the names of "
      "compression.name (dtrain keys)");
  bench->require_subcommand(1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  dtrain::install_stop_handlers();  // SIGINT, SIGTERM: finish the iteration, checkpoint, exit
  std::unique_ptr<dtrain::Comm> comm;
  std::shared_ptr<dtrain::RunYamlFile> run_yaml;  // once training has started
  auto fail = [&comm, &run_yaml](const char* kind, const std::exception& e, int code) {
    // One message, not one per rank: rank 0 reports at once and ends the job; another rank
    // first gives rank 0 the time to do so (for an error every rank finds), and reports only
    // what rank 0 did not (its own).
    if (comm && comm->size() > 1 && comm->rank() != 0)
      std::this_thread::sleep_for(std::chrono::seconds(2));
    // run.yaml's `status: failed` comes from the rank that reports, just before it ends the job:
    // rank 0 at once; another rank only when rank 0 has not ended the job meanwhile (its own
    // error), when run.yaml is this run's (training had started) and its folder is seen from
    // this host (shared, or this host's own). The rename makes a race of two writers harmless.
    if (run_yaml) run_yaml->end("failed", e.what());
    std::cerr << "dtrain: " << kind
              << (comm && comm->size() > 1 ? " (rank " + std::to_string(comm->rank()) + ")"
                                           : std::string())
              << ": " << e.what() << "\n";
    if (comm && comm->size() > 1) comm->abort(code);
    return code;
  };
  try {
    if (dtrain::launched_under_mpi()) {
      dtrain::init_mpi(&argc, &argv);
      comm = dtrain::make_mpi_comm();
      watch_waits(300, *comm);  // until a config says otherwise
    } else {
      comm = dtrain::make_local_comm();
    }
    if (*keys) {
      std::cout << dtrain::config_reference();
      return 0;
    }
    if (*plan) return plan_main(o, ranks_opt->count() > 0, *comm);
    if (*eval) return eval_main(o, *comm);
    if (*bench) {
      bench_opts.include_mpi = !no_mpi;
      return bench_comm_main(bench_opts, o.csv, *comm);
    }
    if (o.config.empty() && !o.resume.empty()) {
      // The run continues with the config it was started with (its resolved config.yaml).
      o.config = o.resume + "/config.yaml";
      if (!std::ifstream(o.config))
        throw dtrain::InputError("--resume " + o.resume + ": no " + o.config +
                                 " (the run's config); give it with --config FILE");
    }
    if (o.config.empty()) {
      std::cerr << "dtrain: --config FILE is required (see dtrain --help)\n";
      return 2;
    }
    return train(o, comm, run_yaml);
  } catch (const dtrain::InputError& e) {
    return fail("error", e, 2);
  } catch (const std::exception& e) {
    return fail("failed", e, 1);
  }
}
