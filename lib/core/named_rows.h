// Lookups shared by the project's tables of named rows (the layer table, the model zoo, the
// algorithm registry): each is a vector of entries with a string key, searched by that key and
// listed in table order for help texts and "did you mean" suggestions.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// The row whose `key` member equals `name`; null when none does.
template <class Row>
const Row* find_row(const std::vector<Row>& rows, std::string Row::*key, const std::string& name) {
  for (const Row& row : rows)
    if (row.*key == name) return &row;
  return nullptr;
}

// Every row's `key`, in table order.
template <class Row>
std::vector<std::string> row_names(const std::vector<Row>& rows, std::string Row::*key) {
  std::vector<std::string> names;
  names.reserve(rows.size());
  for (const Row& row : rows) names.push_back(row.*key);
  return names;
}

}  // namespace dtrain
