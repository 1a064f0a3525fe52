// Test fixtures written on the fly into a temporary folder: idx files (plain and gzip), CIFAR
// binary batches, and a Dataset double whose samples encode their own index.
#pragma once
#include <zlib.h>  // gzopen: .gz fixtures

#include <atomic>      // counting loads across threads
#include <chrono>      // a slow dataset
#include <cstdint>     // uint8_t, uint32_t
#include <filesystem>  // temp_directory_path, remove_all
#include <fstream>     // plain fixtures
#include <stdexcept>   // runtime_error: a failing load
#include <string>
#include <thread>  // this_thread::sleep_for
#include <vector>

#include <unistd.h>  // getpid: unique folder per test process

#include "data/dataset.h"  // Dataset

namespace dtrain::testing {

namespace fs = std::filesystem;

// A fresh folder removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("dtrain_test_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

inline void write_bytes(const fs::path& file, const std::vector<uint8_t>& bytes, bool gz = false) {
  fs::create_directories(file.parent_path());
  if (gz) {
    gzFile f = gzopen(file.c_str(), "wb");
    if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
}

inline void put_be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(v >> shift));
}

// An idx file: magic, dimensions, then `payload`.
inline std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                                      const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> b;
  put_be32(b, magic);
  for (uint32_t d : dims) put_be32(b, d);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

// Pixel value of a tiny idx image: distinct per sample and position.
inline uint8_t idx_pixel(int64_t sample, int64_t i) {
  return static_cast<uint8_t>(sample * 7 + i);
}
inline uint8_t idx_label(int64_t sample) {
  return static_cast<uint8_t>((sample * 3) % 10);
}

// A complete idx split `kind` ("train" / "t10k") of n rows×cols images in `dir`.
inline void write_idx_split(const fs::path& dir, const std::string& kind, uint32_t n, uint32_t rows,
                            uint32_t cols, bool gz) {
  std::vector<uint8_t> pixels, labels;
  for (uint32_t s = 0; s < n; ++s) {
    for (uint32_t i = 0; i < rows * cols; ++i) pixels.push_back(idx_pixel(s, i));
    labels.push_back(idx_label(s));
  }
  const std::string ext = gz ? ".gz" : "";
  write_bytes(dir / (kind + "-images-idx3-ubyte" + ext), idx_bytes(2051, {n, rows, cols}, pixels),
              gz);
  write_bytes(dir / (kind + "-labels-idx1-ubyte" + ext), idx_bytes(2049, {n}, labels), gz);
}

// CIFAR pixel of record `r`, channel c, position i.
inline uint8_t cifar_pixel(int64_t r, int64_t c, int64_t i) {
  return static_cast<uint8_t>(r * 11 + c * 50 + i);
}

// `n` records with `label_bytes` label bytes (CIFAR-100: coarse, fine) starting at record `first`.
inline std::vector<uint8_t> cifar_bytes(int64_t first, int64_t n, int label_bytes, int classes) {
  std::vector<uint8_t> b;
  for (int64_t r = first; r < first + n; ++r) {
    if (label_bytes == 2) b.push_back(static_cast<uint8_t>(r % 20));  // coarse
    b.push_back(static_cast<uint8_t>(r % classes));
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 1024; ++i) b.push_back(cifar_pixel(r, c, i));
    }
  }
  return b;
}

// Sample i is the image filled with the value i and the label i % classes; `fail_at` throws.
class IndexDataset final : public Dataset {
 public:
  IndexDataset(int64_t size, Shape shape = Shape{1, 2, 2}, int64_t fail_at = -1, int sleep_us = 0)
      : size_(size), shape_(std::move(shape)), fail_at_(fail_at), sleep_us_(sleep_us) {}
  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return 10; }
  int32_t load(int64_t index, float* out, int64_t epoch) const override {
    ++loads;
    if (index == fail_at_) throw std::runtime_error("sample " + std::to_string(index) + " broken");
    if (sleep_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    for (int64_t i = 0; i < shape_.numel(); ++i) out[i] = static_cast<float>(index);
    return static_cast<int32_t>(index % 10);
  }
  std::string describe() const override { return "index dataset"; }
  mutable std::atomic<int64_t> loads{0};

 private:
  int64_t size_;
  Shape shape_;
  int64_t fail_at_;
  int sleep_us_;
};

}  // namespace dtrain::testing

namespace dtrain::testing {

// What the E thrown by `f` says; "<no exception>" if it throws none (other kinds propagate).
template <typename E, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<no exception>";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace dtrain::testing
