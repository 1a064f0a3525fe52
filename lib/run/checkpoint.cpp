#include "run/checkpoint.h"

#include <fcntl.h>  // open: fsync needs a descriptor
#include <fmt/format.h>
#include <spdlog/spdlog.h>  // the log names what was skipped and what it cost
#include <unistd.h>         // fsync, close
#include <yaml-cpp/yaml.h>  // manifest.yaml, the configs compared key by key
#include <zlib.h>           // crc32

#include <algorithm>  // sort
#include <csignal>    // the test hook's SIGKILL
#include <cstdlib>    // getenv
#include <cstring>    // memcpy
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/error.h"
#include "core/timer.h"  // Clock, seconds_since

namespace dtrain {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'C', 'K'};
constexpr uint32_t kVersion = 1;
enum Kind : uint8_t { kBuffer = 0, kCounter = 1, kText = 2 };

uint32_t crc_of(const void* data, size_t bytes, uint32_t crc = 0) {
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib takes at most 4 GiB a call
    const uInt n = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    crc = static_cast<uint32_t>(crc32(crc, p, n));
    p += n, bytes -= n;
  }
  return crc;
}

using Sink = std::function<void(const void*, size_t)>;

// Writes `state` in the file layout to `sink`, the trailing CRC included.
void write_state(const SchedulerState& state, const Sink& out) {
  uint32_t total = 0;
  auto put = [&](const void* data, size_t bytes) {
    total = crc_of(data, bytes, total);
    out(data, bytes);
  };
  auto put_u32 = [&](uint32_t v) { put(&v, 4); };
  const uint32_t entries = static_cast<uint32_t>(state.buffers().size() + state.counters().size() +
                                                 state.texts().size());
  put(kMagic, 8);
  put_u32(kVersion);
  put_u32(entries);
  auto entry = [&](Kind kind, const std::string& name, const void* payload, uint64_t bytes) {
    put(&kind, 1);
    put_u32(static_cast<uint32_t>(name.size()));
    put(name.data(), name.size());
    put(&bytes, 8);
    put_u32(crc_of(payload, bytes));
    put(payload, bytes);
  };
  for (const auto& [name, values] : state.buffers())
    entry(kBuffer, name, values.data(), values.size() * sizeof(float));
  for (const auto& [name, value] : state.counters()) entry(kCounter, name, &value, 8);
  for (const auto& [name, text] : state.texts()) entry(kText, name, text.data(), text.size());
  out(&total, 4);
}

// "epoch-0003": after 3 epochs; "epoch-0003-iteration-00000050": 50 iterations into epoch 3.
std::string point_name(const CheckpointPoint& p) {
  return p.iteration == 0 ? fmt::format("epoch-{:04}", p.epoch)
                          : fmt::format("epoch-{:04}-iteration-{:08}", p.epoch + 1, p.iteration);
}

// A file written through an aligned staging buffer with O_DIRECT where the file system allows:
// a buffered write and fsync of a VGG-16 checkpoint (269 MB a rank) spends ~1 s here in page
// cache write-back, a direct write 0.2 s. The unaligned tail goes buffered; fsync follows.
class DirectFile {
 public:
  explicit DirectFile(const fs::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    if (fd_ < 0) {
      direct_ = false;  // tmpfs and others: plain writes
      fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    if (fd_ < 0) fail();
    buffer_ = static_cast<char*>(std::aligned_alloc(kAlign, kBuffer));
  }
  ~DirectFile() {
    std::free(buffer_);
    if (fd_ >= 0) ::close(fd_);
  }
  void write(const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const size_t n = std::min(bytes, kBuffer - used_);
      std::memcpy(buffer_ + used_, p, n);
      used_ += n, p += n, bytes -= n;
      if (used_ == kBuffer) drain(kBuffer);
    }
  }
  // Writes what is left, syncs and closes.
  void finish() {
    const size_t aligned = used_ / kAlign * kAlign;
    drain(aligned);
    if (used_ > 0) {  // the tail: not a multiple of the block size
      if (direct_ && ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_DIRECT) != 0) fail();
      drain(used_);
    }
    if (::fsync(fd_) != 0) fail();
    if (::close(fd_) != 0) fail();
    fd_ = -1;
  }

 private:
  static constexpr size_t kAlign = 4096, kBuffer = 8 << 20;
  // Writes the first `n` buffered bytes; keeps the rest at the buffer's start.
  void drain(size_t n) {
    for (size_t at = 0; at < n;) {
      const ssize_t w = ::write(fd_, buffer_ + at, n - at);
      if (w <= 0) fail();
      at += static_cast<size_t>(w);
    }
    std::memmove(buffer_, buffer_ + n, used_ - n);
    used_ -= n;
  }
  [[noreturn]] void fail() const {
    throw Error("cannot write " + path_.string() + ": " + std::strerror(errno));
  }
  fs::path path_;
  int fd_ = -1;
  bool direct_ = true;
  char* buffer_ = nullptr;
  size_t used_ = 0;
};

// Writes what `produce` gives to `path` so that the file is either absent or complete: a
// temporary file, fsync, rename. `stop_after_temporary`: the test hook of a rank killed while
// it writes.
void write_atomically(const fs::path& path, const std::function<void(const Sink&)>& produce,
                      bool stop_after_temporary = false) {
  const fs::path temporary = path.string() + ".tmp";
  {
    DirectFile f(temporary);
    produce([&](const void* data, size_t bytes) { f.write(data, bytes); });
    f.finish();
  }
  if (stop_after_temporary) std::raise(SIGKILL);
  fs::rename(temporary, path);
}

// The directory's entries (a rename) are durable once it is synced.
void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path.string());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string rank_file(int rank) {
  return fmt::format("rank-{:05}.bin", rank);
}

// The dotted keys of a YAML map and their values as flow text (lists and scalars whole).
void flatten(const YAML::Node& node, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      flatten(kv.second, prefix.empty() ? key : prefix + "." + key, out);
    }
    return;
  }
  YAML::Emitter e;
  e << YAML::Flow << node;
  out.emplace_back(prefix, e.c_str());
}

bool may_change(const std::string& key) {
  auto under = [&](const std::string& p) { return key == p || key.rfind(p + ".", 0) == 0; };
  return under("train.epochs") || under("train.max_iterations") || under("output") ||
         under("checkpoint");
}

// FNV-1a of the keys that must not change on resume and their values: the manifest's hash of
// the run's config.
std::string config_hash(const std::string& yaml) {
  std::vector<std::pair<std::string, std::string>> keys;
  flatten(YAML::Load(yaml), "", keys);
  uint64_t h = 1469598103934665603ULL;
  for (const auto& [key, value] : keys) {
    if (may_change(key)) continue;
    for (const std::string* s : {&key, &value}) {
      for (const char c : *s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
      h = (h ^ 0xff) * 1099511628211ULL;  // a separator no text contains
    }
  }
  return fmt::format("{:016x}", h);
}

// A complete checkpoint: its manifest and point.
struct Found {
  fs::path dir;
  CheckpointPoint point;
  YAML::Node manifest;
};

// The checkpoints under `root` that have a manifest, newest first; the others in `unfinished`.
std::vector<Found> list_checkpoints(const fs::path& root, std::vector<fs::path>* unfinished) {
  std::vector<Found> found;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return found;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory()) continue;
    const fs::path manifest = entry.path() / "manifest.yaml";
    try {
      if (!fs::exists(manifest)) throw Error("no manifest");
      YAML::Node m = YAML::LoadFile(manifest.string());
      found.push_back({entry.path(), {m["epoch"].as<int>(), m["iteration"].as<int64_t>()}, m});
    } catch (const std::exception&) {
      if (unfinished) unfinished->push_back(entry.path());
    }
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.point > b.point; });
  return found;
}

}  // namespace

std::optional<std::string> newest_finished_checkpoint(const std::string& root) {
  const std::vector<Found> found = list_checkpoints(root, nullptr);
  if (found.empty()) return std::nullopt;
  return found.front().dir.string();
}

std::string CheckpointPoint::describe() const {
  if (iteration > 0) return fmt::format("epoch {}, after iteration {}", epoch + 1, iteration);
  return epoch == 0 ? "the start" : fmt::format("after epoch {}", epoch);
}

std::string encode_state(const SchedulerState& state) {
  std::string bytes;
  write_state(state,
              [&](const void* data, size_t n) { bytes.append(static_cast<const char*>(data), n); });
  return bytes;
}

SchedulerState decode_state(const std::string& bytes, const std::string& what) {
  size_t at = 0;
  auto take = [&](void* out, size_t n, const char* field) {
    if (bytes.size() - at < n || at > bytes.size())
      throw Error(fmt::format("{}: truncated at byte {} ({})", what, at, field));
    std::memcpy(out, bytes.data() + at, n);
    at += n;
  };
  if (bytes.size() < 20) throw Error(what + ": too short to be a checkpoint");
  char magic[8];
  take(magic, 8, "magic");
  if (std::memcmp(magic, kMagic, 8) != 0) throw Error(what + ": not a dtrain checkpoint");
  uint32_t version = 0, entries = 0;
  take(&version, 4, "version");
  if (version != kVersion)
    throw Error(
        fmt::format("{}: checkpoint format {}, this dtrain reads {}", what, version, kVersion));
  take(&entries, 4, "entries");
  SchedulerState state;
  for (uint32_t e = 0; e < entries; ++e) {
    uint8_t kind = 0;
    uint32_t name_bytes = 0, crc = 0;
    uint64_t payload = 0;
    take(&kind, 1, "kind");
    take(&name_bytes, 4, "name");
    if (name_bytes > bytes.size() - at) throw Error(what + ": an entry's name is truncated");
    const std::string name = bytes.substr(at, name_bytes);
    at += name_bytes;
    take(&payload, 8, "size");
    take(&crc, 4, "checksum");
    if (payload > bytes.size() - 4 - at)
      throw Error(fmt::format("{}: '{}' is truncated", what, name));
    const char* data = bytes.data() + at;
    if (crc_of(data, payload) != crc)
      throw Error(fmt::format("{}: '{}' fails its checksum", what, name));
    at += payload;
    if (kind == kBuffer && payload % 4 == 0) {
      std::vector<float> values(payload / 4);
      std::memcpy(values.data(), data, payload);
      state.put_values(name, std::move(values));
    } else if (kind == kCounter && payload == 8) {
      int64_t v = 0;
      std::memcpy(&v, data, 8);
      state.set_counter(name, v);
    } else if (kind == kText) {
      state.set_text(name, std::string(data, payload));
    } else {
      throw Error(
          fmt::format("{}: '{}' has an unknown kind {} or size {}", what, name, kind, payload));
    }
  }
  if (at != bytes.size() - 4) throw Error(what + ": bytes after the last entry");
  // Each entry was intact; the whole file's checksum covers the framing between them.
  uint32_t stored_total = 0;
  std::memcpy(&stored_total, bytes.data() + bytes.size() - 4, 4);
  if (crc_of(bytes.data(), bytes.size() - 4) != stored_total)
    throw Error(what + ": the file's checksum does not match (damaged or incomplete)");
  return state;
}

std::string first_config_difference(const std::string& saved_yaml, const std::string& yaml) {
  std::vector<std::pair<std::string, std::string>> a, b;
  flatten(YAML::Load(saved_yaml), "", a);
  flatten(YAML::Load(yaml), "", b);
  auto value_in = [](const auto& list, const std::string& key) -> const std::string* {
    for (const auto& [k, v] : list)
      if (k == key) return &v;
    return nullptr;
  };
  for (const auto& [key, value] : a) {
    if (may_change(key)) continue;
    const std::string* other = value_in(b, key);
    if (!other || *other != value) return key;
  }
  // Keys added after a checkpoint was written are absent from its config: at the value that
  // means what the older run did, they are no difference.
  static const std::vector<std::pair<std::string, std::string>> kAddedSince{
      {"algorithm.shard", "none"}, {"model.recompute", "none"}};
  for (const auto& [key, value] : b) {
    if (may_change(key) || value_in(a, key)) continue;
    const std::string* old = value_in(kAddedSince, key);
    if (!old || *old != value) return key;
  }
  return "";
}

CheckpointStore::CheckpointStore(Comm& comm, CheckpointOptions options)
    : comm_(comm), options_(std::move(options)) {}

double CheckpointStore::write(const CheckpointPoint& at, const SchedulerState& state) {
  const auto start = Clock::now();
  const fs::path root(options_.dir);
  const fs::path dir = root / point_name(at);
  const bool root_rank = comm_.rank() == 0;
  // A checkpoint of this point from an earlier attempt: unfinished until its files are new.
  if (root_rank) {
    fs::create_directories(dir);
    fs::remove(dir / "manifest.yaml");
  }
  comm_.barrier();
  fs::create_directories(dir);
  // Tests: rank DTRAIN_TEST_KILL_IN_CHECKPOINT dies here, at the checkpoint
  // DTRAIN_TEST_KILL_AT_CHECKPOINT (1-based; default the first) this process writes.
  ++writes_;
  const char* hook = std::getenv("DTRAIN_TEST_KILL_IN_CHECKPOINT");
  const char* at_write = std::getenv("DTRAIN_TEST_KILL_AT_CHECKPOINT");
  const bool die =
      hook && std::atoi(hook) == comm_.rank() && writes_ == (at_write ? std::atoi(at_write) : 1);
  std::vector<double> ok{1};
  try {
    write_atomically(
        dir / rank_file(comm_.rank()), [&](const Sink& sink) { write_state(state, sink); }, die);
  } catch (const std::exception& e) {
    spdlog::error("rank {}: {}", comm_.rank(), e.what());
    ok[0] = 0;
  }
  std::vector<double> failed{1 - ok[0]};
  comm_.allreduce_sum(failed);
  if (failed[0] > 0)
    throw Error(fmt::format("checkpoint {} could not be written by {} rank(s) (see above)",
                            dir.string(), failed[0]));
  if (root_rank) {
    sync_directory(dir);
    YAML::Emitter m;
    m << YAML::BeginMap << YAML::Key << "format" << YAML::Value << "dtrain checkpoint 1"
      << YAML::Key << "epoch" << YAML::Value << at.epoch << YAML::Key << "iteration" << YAML::Value
      << at.iteration << YAML::Key << "ranks" << YAML::Value << comm_.size() << YAML::Key << "point"
      << YAML::Value << at.describe() << YAML::Key << "config_hash" << YAML::Value
      << config_hash(options_.config_yaml) << YAML::EndMap;
    write_atomically(dir / "config.yaml", [&](const Sink& sink) {
      sink(options_.config_yaml.data(), options_.config_yaml.size());
    });
    const std::string manifest = std::string(m.c_str()) + "\n";
    write_atomically(dir / "manifest.yaml",
                     [&](const Sink& sink) { sink(manifest.data(), manifest.size()); });
    sync_directory(dir);
    // The newest `keep` stay; unfinished ones are left-overs of a failed write.
    std::vector<fs::path> unfinished;
    const std::vector<Found> all = list_checkpoints(root, &unfinished);
    std::error_code ec;
    for (size_t i = static_cast<size_t>(options_.keep); i < all.size(); ++i)
      fs::remove_all(all[i].dir, ec);
    for (const fs::path& p : unfinished) fs::remove_all(p, ec);
    sync_directory(root);
  }
  return seconds_since(start);
}

std::optional<CheckpointPoint> CheckpointStore::read_newest(SchedulerState& state) {
  const bool root_rank = comm_.rank() == 0;
  for (const Found& c : list_checkpoints(options_.dir, nullptr)) {
    const int ranks = c.manifest["ranks"] ? c.manifest["ranks"].as<int>() : -1;
    DTRAIN_INPUT_CHECK(ranks == comm_.size())
        << "--resume: " << c.dir.string() << " was written by " << ranks
        << " rank(s), this job has " << comm_.size() << " (run it with mpirun -np " << ranks << ")";
    // The hash says whether the configs agree; the saved config, where.
    const bool same_hash =
        c.manifest["config_hash"] &&
        c.manifest["config_hash"].as<std::string>() == config_hash(options_.config_yaml);
    std::string saved_config;
    try {
      saved_config = read_file(c.dir / "config.yaml");
    } catch (const std::exception&) {
    }
    DTRAIN_INPUT_CHECK(same_hash || !saved_config.empty())
        << "--resume: " << c.dir.string() << " was written with another config (its hash "
        << (c.manifest["config_hash"] ? c.manifest["config_hash"].as<std::string>() : "absent")
        << "), and its config.yaml is missing";
    if (!same_hash) {
      const std::string key = first_config_difference(saved_config, options_.config_yaml);
      DTRAIN_INPUT_CHECK(key.empty()) << "--resume: the config differs from the checkpoint's ("
                                      << (c.dir / "config.yaml").string() << ") at `" << key
                                      << "`; only train.epochs, train.max_iterations, output.* and "
                                      << "checkpoint.* may change";
    }
    std::vector<double> damaged{0};
    const fs::path file = c.dir / rank_file(comm_.rank());
    try {
      state = decode_state(read_file(file), file.string());
    } catch (const std::exception& e) {
      spdlog::warn("rank {}: {}", comm_.rank(), e.what());
      damaged[0] = 1;
    }
    comm_.allreduce_sum(damaged);
    if (damaged[0] == 0) return c.point;
    if (root_rank)
      spdlog::warn("checkpoint {} is damaged on {} rank(s): skipped for the one before",
                   c.dir.string(), damaged[0]);
    state = SchedulerState{};
  }
  return std::nullopt;
}

}  // namespace dtrain
