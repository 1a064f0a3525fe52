// Maps the validated experiment settings onto the options structs of the modules below run/,
// which know nothing of the config format.
#pragma once
#include <memory>    // unique_ptr: make_optimizer
#include <optional>  // emulated_link: none without cluster.link
#include <vector>

#include "backend/backend.h"    // BackendOptions
#include "comm/paced_comm.h"    // LinkModel
#include "data/loader.h"        // LoaderOptions
#include "nn/model.h"           // Model: optimizer.freeze_layers
#include "optim/lr_schedule.h"  // LrScheduleOptions
#include "optim/optimizer.h"    // Optimizer
#include "run/config.h"         // ExperimentConfig
#include "sched/scheduler.h"    // make_optimizer

namespace dtrain {

// `local_rank` picks the GPU on multi-GPU nodes; only `announce`s the `auto` choice on stderr.
BackendOptions backend_options(const ExperimentConfig& c, int local_rank = 0, bool announce = true);
// cluster.precision as the model's dtype; InputError naming the key and the reason where the
// backend cannot train in bf16 (Backend::bf16_unavailable).
DType model_precision(const ExperimentConfig& c, const Backend& backend);
// This rank's share of the global batches among `world` data-parallel ranks.
LoaderOptions train_loader_options(const ExperimentConfig& c, int rank, int world);
LoaderOptions test_loader_options(const ExperimentConfig& c, int rank, int world);
// optimizer.name's optimizer over `model`'s flat buffers (its frozen prefix excluded).
std::unique_ptr<Optimizer> make_optimizer(const ExperimentConfig& c, Model& model);
// The multiples of `ranks` nearest to `batch` ("64 or 72", "8"): the fix of a global batch that
// the ranks do not divide.
std::string nearest_batches(int64_t batch, int ranks);
LrScheduleOptions schedule_options(const ExperimentConfig& c);
// The slow-down cluster.stragglers gives `rank` (1 when it is not listed): the factor its compute
// is stretched by. A listed rank the job lacks is check_stragglers' (rank_checks.h) to refuse.
double compute_slowdown(const ExperimentConfig& c, int rank);
// cluster.link: the network PacedComm emulates, and the predictions plan for; none without it.
std::optional<LinkModel> emulated_link(const ExperimentConfig& c);
// Applies optimizer.freeze_layers to `model`; InputError if it would freeze every layer.
void freeze_layers(const ExperimentConfig& c, Model& model);

}  // namespace dtrain
