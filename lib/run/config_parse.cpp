// load_config: file → YAML tree → --set overrides → typed sections, collecting every problem.
#include <fmt/format.h>  // fmt::format: messages

#include <cerrno>      // errno: why a file could not be opened
#include <cstring>     // std::strerror
#include <filesystem>  // std::filesystem: existence checks, the file's stem
#include <fstream>     // std::ifstream: reading the file
#include <iterator>    // std::istreambuf_iterator

#include "core/error.h"            // InputError, DTRAIN_INPUT_CHECK
#include "run/config.h"            // the API implemented here
#include "run/config_overrides.h"  // apply_overrides: --set
#include "run/config_reader.h"     // Reader, Section: typed reads that collect problems
#include "run/config_validate.h"   // check_consistency, check_model

namespace dtrain {

using config_detail::Bounds;
using config_detail::Reader;
using config_detail::Section;

namespace {

YAML::Node read_yaml_file(const std::string& path) {
  std::error_code ec;
  DTRAIN_INPUT_CHECK(std::filesystem::exists(path, ec)) << path << ": no such config file";
  DTRAIN_INPUT_CHECK(!std::filesystem::is_directory(path, ec))
      << path << ": is a directory, expected a YAML config file";
  std::ifstream in(path, std::ios::binary);
  DTRAIN_INPUT_CHECK(in) << path << ": cannot read the config file (" << std::strerror(errno)
                         << ")";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  DTRAIN_INPUT_CHECK(!in.bad()) << path << ": cannot read the config file";
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {}", path, e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}: cannot parse YAML: {}", path, e.msg));
  }
}

void read_dataset(Section& top, DatasetConfig& d) {
  Section s = top.child("dataset");
  Reader& r = s.reader();
  if (!s.exists())
    r.add("dataset", "required: a map with at least `name`, e.g. {name: fashion_mnist}");
  else
    s.require("name", "one of mnist, fashion_mnist, cifar10, cifar100, imagefolder, synthetic");
  s.choice("name", d.name,
           {"mnist", "fashion_mnist", "cifar10", "cifar100", "imagefolder", "synthetic"});
  if (!s.text("path", d.path) && d.name == "fashion_mnist")
    d.path = "/usr/share/datasets/fashion-mnist";  // where scripts/setup.sh puts it
  s.integer("batch_size", d.batch_size, Bounds::above(0));
  if (!s.has("test_batch_size")) d.test_batch_size = d.batch_size;
  s.integer("test_batch_size", d.test_batch_size, Bounds::above(0));
  std::vector<int> shape;
  if (s.integers("shape", shape, Bounds::above(0))) {
    if (shape.size() == 3)
      d.shape = shape;
    else
      r.add(s.path_of("shape"),
            fmt::format("expected 3 entries [channels, height, width], got {}", shape.size()),
            s.get("shape"));
  }
  s.integer("classes", d.classes, Bounds::at_least(2));
  s.integer("train_size", d.train_size, Bounds::at_least(0));
  s.integer("test_size", d.test_size, Bounds::at_least(0));
  s.integer("image_size", d.image_size, Bounds::above(0));
  s.integer("resize", d.resize, Bounds::above(0));
  s.boolean("augment", d.augment);
  s.reals("mean", d.mean);
  s.reals("std", d.std, Bounds::above(0));
  s.integer("prefetch", d.prefetch, Bounds::at_least(0));
  s.integer("workers", d.workers, Bounds::at_least(1));
}

void read_link(Section& s, std::optional<LinkConfig>& out) {
  // Absent or empty: no emulation. Not a map: reported by Section.
  if (!s.exists() || !s.node().IsMap()) return;
  Reader& r = s.reader();
  LinkConfig link;
  bool ok = true;
  auto parse = [&](const char* key, std::string& text, double& value, auto parser) {
    if (!s.text(key, text)) return false;
    try {
      value = parser(text);
      return true;
    } catch (const InputError& e) {
      r.add(s.path_of(key), e.what(), s.get(key));
      return false;
    }
  };
  ok &= s.require("bandwidth", "a rate such as 10Gbps when cluster.link is given") &&
        parse("bandwidth", link.bandwidth_text, link.bandwidth_Bps, parse_bandwidth);
  link.latency_text = std::string(1, '0');  // (not = "0": GCC 12 -Wrestrict false positive)
  if (s.has("latency")) ok &= parse("latency", link.latency_text, link.latency_s, parse_duration);
  if (ok) out = link;
}

void read_cluster(Section& top, ClusterConfig& c) {
  Section s = top.child("cluster");
  s.choice("device", c.device, {"cpu", "cuda", "auto"});
  s.choice("comm", c.comm, {"auto", "nccl", "mpi"});
  s.boolean("tf32", c.tf32);
  s.integer("threads_per_rank", c.threads_per_rank, Bounds::at_least(1));
  Section link = s.child("link");
  read_link(link, c.link);
  for (Section& item : s.children("stragglers")) {
    StragglerConfig straggler;
    item.require("rank", "the rank to slow down");
    item.integer("rank", straggler.rank, Bounds::at_least(0));
    item.require("slowdown", "the factor its compute time is stretched by, >= 1");
    item.real("slowdown", straggler.slowdown, Bounds::at_least(1));
    c.stragglers.push_back(straggler);
  }
}

void read_algorithm(Section& top, AlgorithmConfig& a) {
  Section s = top.child("algorithm");
  s.choice("name", a.name,
           {"sync", "ps_sync", "pipe_sgd", "sapipe", "pipedream", "gossip", "d_psgd", "hpsgd",
            "local_sgd"});
  s.integer("K", a.K, Bounds::at_least(1));
  s.integer("warmup_epochs", a.warmup_epochs, Bounds::at_least(0));
  s.integer("segments", a.segments, Bounds::at_least(1));
}

void read_schedule(Section& top, ScheduleConfig& sc) {
  Section s = top.child("schedule");
  s.choice("name", sc.name, {"constant", "step", "multistep", "cosine"});
  s.integer("every_epochs", sc.every_epochs, Bounds::at_least(1));
  s.real("gamma", sc.gamma, Bounds::open_closed(0, 1));
  s.integers("milestones", sc.milestones, Bounds::at_least(1));
  s.real("min_lr", sc.min_lr, Bounds::at_least(0));
  s.real("warmup_epochs", sc.warmup_epochs, Bounds::at_least(0));
  s.real("warmup_start_factor", sc.warmup_start_factor, Bounds::open_closed(0, 1));
}

void read_optimizer(Section& top, OptimizerConfig& o) {
  Section s = top.child("optimizer");
  s.choice("name", o.name, {"sgd"});
  s.real("lr", o.lr, Bounds::above(0));
  s.real("momentum", o.momentum, Bounds::closed_open(0, 1));
  s.real("dampening", o.dampening, Bounds::closed_open(0, 1));
  s.real("weight_decay", o.weight_decay, Bounds::at_least(0));
  s.boolean("nesterov", o.nesterov);
  s.integer("freeze_layers", o.freeze_layers, Bounds::at_least(0));
  read_schedule(s, o.schedule);
}

void read_train(Section& top, TrainConfig& t) {
  Section s = top.child("train");
  s.integer("epochs", t.epochs, Bounds::at_least(1));
  s.integer("eval_every_epochs", t.eval_every_epochs, Bounds::at_least(1));
  s.integer("max_iterations", t.max_iterations, Bounds::at_least(0));
  s.integer("log_every_iterations", t.log_every_iterations, Bounds::at_least(0));
}

void read_output(Section& top, OutputConfig& o, const std::string& name,
                 const std::optional<std::string>& output_dir) {
  Section s = top.child("output");
  bool given = s.text("dir", o.dir);
  if (output_dir) {
    o.dir = *output_dir;  // --out wins over the file and --set
    DTRAIN_INPUT_CHECK(!o.dir.empty()) << "--out: the directory must not be empty";
  } else if (given && o.dir.empty()) {
    s.reader().add(s.path_of("dir"), "must not be empty", s.get("dir"));
  } else if (!given) {
    o.dir = "runs/" + name;
  }
  s.boolean("trace", o.trace);
}

}  // namespace

ExperimentConfig load_config(const ConfigSources& sources) {
  YAML::Node root = read_yaml_file(sources.path);
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);  // an empty file: all defaults
  DTRAIN_INPUT_CHECK(root.IsMap()) << sources.path
                                   << ": expected a map of settings (name:, model:, dataset:, "
                                      "...) at the top level";
  auto set_items = config_detail::apply_overrides(root, sources.overrides);

  Reader reader(sources.path, root, std::move(set_items));
  Section top(reader, root, "");
  ExperimentConfig config;
  config.source_path = sources.path;
  if (!top.text("name", config.name))
    config.name = std::filesystem::path(sources.path).stem().string();
  if (config.name.empty() && !reader.has_problem("name"))
    reader.add("name", "must not be empty", top.get("name"));
  top.unsigned_integer("seed", config.seed);
  config.model = config_detail::check_model(top.get("model"), sources.check_model, reader);
  read_dataset(top, config.dataset);
  read_cluster(top, config.cluster);
  read_algorithm(top, config.algorithm);
  Section compression = top.child("compression");
  compression.choice("name", config.compression.name, {"none", "truncate16", "quantize8"});
  read_optimizer(top, config.optimizer);
  read_train(top, config.train);
  read_output(top, config.output, config.name, sources.output_dir);

  config_detail::check_consistency(config, reader);
  reader.report_unknown_keys();
  if (!reader.problems().empty()) throw InputError(reader.render());
  return config;
}

}  // namespace dtrain
