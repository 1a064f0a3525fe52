#include "run/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>  // isatty

#include <algorithm>
#include <cstdio>

namespace dtrain {
namespace {
std::string format_eta(double seconds) {
  if (!(seconds >= 0) || seconds > 360000) return "--:--";
  const int s = static_cast<int>(seconds);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}
}  // namespace

Progress::Progress(int epochs, int64_t iterations_per_epoch, int64_t max_iterations,
                   int64_t log_every_iterations)
    : tty_(isatty(fileno(stdout)) != 0),
      epochs_(epochs),
      iterations_per_epoch_(iterations_per_epoch),
      total_iterations_(epochs * iterations_per_epoch),
      log_every_(log_every_iterations),
      start_(Clock::now()),
      last_draw_(start_) {
  if (max_iterations > 0) total_iterations_ = std::min(total_iterations_, max_iterations);
  if (log_every_ <= 0) log_every_ = std::max<int64_t>(1, iterations_per_epoch_ / 4);
}

void Progress::iteration(const IterationReport& r) {
  ++done_;
  samples_ += r.samples;
  loss_ema_ = loss_ema_ < 0 ? r.loss : 0.9 * loss_ema_ + 0.1 * r.loss;
  const double elapsed = seconds_since(start_);
  const double rate = elapsed > 0 ? samples_ / elapsed : 0;
  const double eta = done_ > 0 ? elapsed / done_ * (total_iterations_ - done_) : -1;
  const std::string text =
      fmt::format("epoch {}/{} | iter {}/{} | loss {:.4f} | {:.0f} samples/s | ETA {}", r.epoch + 1,
                  epochs_, r.iteration, iterations_per_epoch_, loss_ema_, rate, format_eta(eta));
  if (tty_) {
    if (seconds_since(last_draw_) < 0.1 && r.iteration != iterations_per_epoch_) return;
    last_draw_ = Clock::now();
    std::fputs(("\r\033[2K" + text).c_str(), stdout);
    std::fflush(stdout);
    line_open_ = true;
  } else if (r.iteration % log_every_ == 0) {
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
