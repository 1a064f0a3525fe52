// The safetensors file format (the Hugging Face format PyTorch users load with
// safetensors.torch.load_file) for named f32 host tensors: an 8-byte little-endian header
// length, a JSON header mapping each tensor's name to {"dtype": "F32", "shape": [...],
// "data_offsets": [begin, end]} (offsets into the data section, tensors back to back in header
// order) and an optional "__metadata__" map of strings, then the raw little-endian data.
// model.safetensors, model.init_from and `dtrain eval` read and write it through this file.
#pragma once
#include <functional>  // TensorSource::fill
#include <map>
#include <string>
#include <vector>

#include "core/shape.h"  // Shape

namespace dtrain {

struct NamedTensor {
  std::string name;  // "conv1.weight", "bn1.running_mean"
  Shape shape;
  std::vector<float> values;  // shape.numel() of them, row-major
};
using NamedTensors = std::vector<NamedTensor>;
using TensorMetadata = std::map<std::string, std::string>;

// The file's bytes: the header lists the tensors in the given order, padded with spaces to a
// multiple of 8 bytes (as the reference writer does, so the data is aligned).
std::string encode_safetensors(const NamedTensors& tensors, const TensorMetadata& metadata = {});
// The tensors of a file's bytes, in the order of their data. InputError naming `what` (the
// file) and the fault when the bytes are not a valid safetensors file of F32 tensors: too short,
// a header length beyond the file, a header that is not a JSON object, another dtype, a shape or
// offsets that do not fit, tensors that overlap or leave a gap, a repeated name.
NamedTensors decode_safetensors(const std::string& bytes, const std::string& what,
                                TensorMetadata* metadata = nullptr);

// Writes `path` atomically: a temporary file beside it, then a rename, so that a reader never
// sees half a file and an old file stays whole until the new one is complete. Error on I/O.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const TensorMetadata& metadata = {});
// A tensor a writer reads when it reaches it, in parts: `fill(dst, begin, count)` writes its
// values [begin, begin + count) (row-major) to `dst`, so that the caller holds a part of one
// tensor at a time, not a copy of the model. Where reading takes the ranks' communication
// (sharded weights), ranks that write nothing call it with a null `dst`: the same parts, in the
// same order, nothing copied.
struct TensorSource {
  std::string name;
  Shape shape;
  std::function<void(float* dst, int64_t begin, int64_t count)> fill;
};
// The parts (elements) in which write_safetensors reads a TensorSource: 16 MB.
inline constexpr int64_t kTensorSourcePart = int64_t{1} << 22;
// write_safetensors of tensors read one by one, in order, in parts of kTensorSourcePart.
void write_safetensors(const std::string& path, const std::vector<TensorSource>& tensors,
                       const TensorMetadata& metadata = {});
// InputError naming the file when it cannot be read or is not valid (decode_safetensors).
NamedTensors read_safetensors(const std::string& path, TensorMetadata* metadata = nullptr);

}  // namespace dtrain
