// find_row and row_names: the lookups of the layer table, the zoo and the algorithm registry.
#include <doctest/doctest.h>

#include "core/named_rows.h"

namespace dtrain {
namespace {

struct Row {
  std::string name;
  int value = 0;
};

TEST_CASE("find_row returns the row with that key, and null for an unknown one") {
  const std::vector<Row> rows{{"relu", 1}, {"gelu", 2}, {"linear", 3}};
  const Row* gelu = find_row(rows, &Row::name, "gelu");
  REQUIRE(gelu != nullptr);
  CHECK(gelu == &rows[1]);
  CHECK(gelu->value == 2);
  CHECK(find_row(rows, &Row::name, "Gelu") == nullptr);  // exact, case and all
  CHECK(find_row(rows, &Row::name, "") == nullptr);
  CHECK(find_row(std::vector<Row>{}, &Row::name, "relu") == nullptr);
}

TEST_CASE("row_names lists the keys in table order") {
  const std::vector<Row> rows{{"sync", 0}, {"gossip", 0}, {"pipedream", 0}};
  CHECK(row_names(rows, &Row::name) == std::vector<std::string>{"sync", "gossip", "pipedream"});
  CHECK(row_names(std::vector<Row>{}, &Row::name).empty());
}

}  // namespace
}  // namespace dtrain
