// The `dataset:` section of an experiment file, read once: the keys every dataset shares
// (declared here) and the chosen dataset's own keys (its row's schema, dataset_table.h), in one
// order — the row's keys sit among the shared ones where its row says — for reading (every
// problem collected in that order), config.yaml, the settings table and `dtrain keys`.
#pragma once
#include <yaml-cpp/yaml.h>  // YAML::Node: the written section

#include <string>
#include <vector>

#include "config/reader.h"        // Reader, Section
#include "config/schema.h"        // Style, KeyDoc
#include "data/dataset_config.h"  // DatasetConfig

namespace dtrain {

// Reads the section into `out`. A key of another dataset than the chosen one is a problem
// naming the datasets it belongs to; with no valid name, no dataset's key is judged.
void read_dataset(config::Section& s, DatasetConfig& out);
// The keys that apply to `d.name`, in the section's order.
YAML::Node write_dataset(const DatasetConfig& d, config::Style style);
// The reference rows of `dataset.*`: the shared keys and every dataset's own, each row saying
// which datasets it applies to.
std::vector<config::KeyDoc> dataset_reference();

// The rules between keys of the section, once it is read: dataset.path where the dataset needs
// files and has no default place for them, and one mean and std per channel of its samples.
void check_dataset(const DatasetConfig& d, config::Reader& r);

// A dataset an experiment may name alone, `{name: X}` (its files have a default place, or it
// needs none): the example of messages.
const std::string& dataset_example();

}  // namespace dtrain
