// The one-line summary every Dataset::describe() returns, in one format.
#pragma once
#include <cstdint>  // int64_t
#include <string>
#include <string_view>

#include "core/shape.h"    // Shape::str
#include "data/dataset.h"  // Split, split_name

namespace dtrain {

// "NAME train: 60000 × [1, 28, 28], 10 classes (SOURCE)": the dataset's name, the split, its
// samples, their shape and classes, and where they come from.
inline std::string describe_dataset(std::string_view name, Split split, int64_t size,
                                    const Shape& shape, int64_t classes, std::string_view source) {
  std::string s(name);
  s += " ";
  s += split_name(split);
  s += ": " + std::to_string(size) + " × " + shape.str() + ", " + std::to_string(classes) +
       " classes";
  if (!source.empty()) s += " (" + std::string(source) + ")";
  return s;
}

}  // namespace dtrain
