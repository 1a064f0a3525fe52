// Whole-file reads of dataset files, plain or gzip-compressed, with InputErrors that name the file.
#pragma once
#include <cstdint>     // uint8_t
#include <filesystem>  // path
#include <initializer_list>
#include <string>
#include <vector>

namespace dtrain {

// All (decompressed) bytes of `file`; zlib's gz* API reads plain files as they are.
std::vector<uint8_t> read_whole_file(const std::filesystem::path& file);

// The first of `dir`/name for name in `names` that exists, or an empty path.
std::filesystem::path find_first_file(const std::filesystem::path& dir,
                                      std::initializer_list<std::string> names);

}  // namespace dtrain
