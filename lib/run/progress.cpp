#include "run/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>  // isatty, readlink, getppid

#include <algorithm>
#include <cmath>  // isnan: a rank without a loss; exp: perplexity
#include <cstdio>
#include <cstdlib>  // getenv
#include <fstream>

namespace dtrain {
namespace {
std::string format_eta(double seconds) {
  if (!(seconds >= 0) || seconds > 360000) return "--:--";
  const int s = static_cast<int>(seconds);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

// Process `pid`'s command name and parent, from /proc (Linux); false when unreadable.
bool read_process(long pid, std::string* name, long* parent) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
  const auto open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 4 >= line.size())
    return false;
  *name = line.substr(open + 1, close - open - 1);
  *parent = std::strtol(line.c_str() + close + 4, nullptr, 10);
  return true;
}

// Whether file descriptor 1 of process `pid` is a terminal (/dev/pts/N or /dev/ttyX).
bool stdout_is_terminal(long pid) {
  char target[256];
  const std::string link = "/proc/" + std::to_string(pid) + "/fd/1";
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return false;
  const std::string path(target, static_cast<size_t>(n));
  return path.starts_with("/dev/pts/") || path.starts_with("/dev/tty");
}

bool launcher_output_is_terminal() {
  long pid = getppid();
  for (int depth = 0; depth < 16 && pid > 1; ++depth) {
    std::string name;
    long parent = 0;
    if (!read_process(pid, &name, &parent)) return false;
    // (MPICH's hydra_pmi_proxy is passed by: its stdout is a pipe to mpiexec, further up.)
    if (name == "mpirun" || name == "mpiexec" || name == "mpiexec.hydra" || name == "orterun" ||
        name == "prterun" || name == "prte")
      return stdout_is_terminal(pid);
    pid = parent;
  }
  return false;
}

bool under_mpi_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}
}  // namespace

double eta_seconds(double elapsed_s, int64_t done, int64_t left) {
  if (done <= 0) return -1;
  return elapsed_s / static_cast<double>(done) * static_cast<double>(std::max<int64_t>(0, left));
}

ProgressMode resolve_progress_mode(ProgressMode mode) {
  if (mode != ProgressMode::auto_) return mode;
  const bool terminal =
      under_mpi_launcher() ? launcher_output_is_terminal() : isatty(fileno(stdout)) != 0;
  return terminal ? ProgressMode::bar : ProgressMode::log;
}

Progress::Progress(ProgressMode mode, int epochs, int64_t iterations_per_epoch,
                   int64_t max_iterations, int64_t log_every_iterations)
    : mode_(resolve_progress_mode(mode)),
      epochs_(epochs),
      iterations_per_epoch_(iterations_per_epoch),
      total_iterations_(epochs * iterations_per_epoch),
      log_every_(log_every_iterations),
      start_(Clock::now()),
      last_draw_(start_) {
  if (max_iterations > 0) total_iterations_ = std::min(total_iterations_, max_iterations);
  if (log_every_ <= 0) log_every_ = std::max<int64_t>(1, iterations_per_epoch_ / 4);
}

std::string format_rate(double samples_per_s, int64_t tokens_per_sample) {
  return tokens_per_sample > 0 ? fmt::format("{:.0f} tokens/s",
                                             samples_per_s * static_cast<double>(tokens_per_sample))
                               : fmt::format("{:.0f} samples/s", samples_per_s);
}

std::string format_loss(const char* what, double loss, int64_t tokens_per_sample) {
  if (tokens_per_sample <= 0) return fmt::format("{} {:.4f}", what, loss);
  return fmt::format("{} {:.4f} (ppl {:.2f})", what, loss, std::exp(loss));
}

void Progress::resume_at(double epochs_done) {
  before_ = std::llround(epochs_done * static_cast<double>(iterations_per_epoch_));
}

void Progress::iteration(const IterationReport& r) {
  ++done_;
  samples_ += r.samples;
  if (r.epoch != epoch_) epoch_ = r.epoch, epoch_loss_sum_ = 0, epoch_iterations_ = 0;
  // A NaN loss: none known at this step (a pipeline's input stage before the output stage's
  // losses come back with the gradients).
  if (!std::isnan(r.loss)) epoch_loss_sum_ += r.loss, ++epoch_iterations_;
  if (mode_ == ProgressMode::none) return;
  const bool due = mode_ == ProgressMode::bar
                       ? seconds_since(last_draw_) >= 0.1 || r.iteration == iterations_per_epoch_
                       : done_ % log_every_ == 0;
  if (!due) return;
  const double elapsed = seconds_since(start_);
  const double rate = elapsed > 0 ? samples_ / elapsed : 0;
  const double eta = eta_seconds(elapsed, done_, iterations_left());
  const std::string loss =
      epoch_iterations_ == 0
          ? std::string("loss -")
          : format_loss("loss", epoch_loss_sum_ / epoch_iterations_, tokens_per_sample_) +
                " (epoch mean)";
  const std::string text = fmt::format("epoch {}/{} | iter {}/{} | {} | {} | ETA {}", r.epoch + 1,
                                       epochs_, r.iteration, iterations_per_epoch_, loss,
                                       format_rate(rate, tokens_per_sample_), format_eta(eta));
  if (mode_ == ProgressMode::bar) {
    last_draw_ = Clock::now();
    std::fputs(("\r\033[2K" + text).c_str(), stdout);
    std::fflush(stdout);
    line_open_ = true;
  } else {
    spdlog::info("{}", text);
  }
}

void Progress::clear_line() {
  if (line_open_) {
    std::fputs("\r\033[2K", stdout);
    std::fflush(stdout);
    line_open_ = false;
  }
}

}  // namespace dtrain
