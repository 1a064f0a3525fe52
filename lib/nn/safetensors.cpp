#include "nn/safetensors.h"

#include <algorithm>  // sort, max
#include <bit>        // endian: the format is little-endian, as the machines dtrain runs on
#include <cstdint>
#include <cstring>  // memcpy
#include <filesystem>
#include <fstream>
#include <iterator>  // istreambuf_iterator
#include <nlohmann/json.hpp>
#include <set>
#include <utility>  // pair

#include "core/error.h"

namespace dtrain {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; this writer copies memory as it is");

namespace {

using Json = nlohmann::ordered_json;  // keeps the header in the order the tensors are written

constexpr uint64_t kLengthBytes = 8;
// The reference implementation refuses headers above 100 MB: a larger length is a damaged or
// foreign file, not a model.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct Entry {
  std::string name;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// A non-negative integer of the header, or InputError naming the field.
uint64_t natural(const Json& value, const std::string& what, const std::string& field) {
  DTRAIN_INPUT_CHECK(value.is_number_unsigned())
      << what << ": " << field << " must be a non-negative integer, got " << value.dump();
  return value.get<uint64_t>();
}

Entry read_entry(const std::string& name, const Json& info, const std::string& what,
                 uint64_t data_bytes) {
  const std::string at = "tensor '" + name + "'";
  DTRAIN_INPUT_CHECK(info.is_object()) << what << ": " << at << " is not described by a map";
  DTRAIN_INPUT_CHECK(info.contains("dtype") && info.contains("shape") &&
                     info.contains("data_offsets"))
      << what << ": " << at << " needs dtype, shape and data_offsets";
  const Json& dtype = info["dtype"];
  DTRAIN_INPUT_CHECK(dtype.is_string() && dtype.get<std::string>() == "F32")
      << what << ": " << at << " has dtype " << dtype.dump() << "; dtrain reads F32 only";
  const Json& shape = info["shape"];
  DTRAIN_INPUT_CHECK(shape.is_array()) << what << ": " << at << ": shape must be a list";
  Entry e;
  e.name = name;
  std::vector<int64_t> dims;
  uint64_t elements = 1;
  for (const Json& d : shape) {
    const uint64_t dim = natural(d, what, at + " shape");
    // Beyond the data section a shape cannot be valid: checked before the product overflows.
    DTRAIN_INPUT_CHECK(dim == 0 || elements <= data_bytes / 4 / dim)
        << what << ": " << at << " has shape " << shape.dump() << ", larger than the file's data";
    elements *= dim;
    dims.push_back(static_cast<int64_t>(dim));
  }
  e.shape = Shape(std::move(dims));
  const Json& offsets = info["data_offsets"];
  DTRAIN_INPUT_CHECK(offsets.is_array() && offsets.size() == 2)
      << what << ": " << at << ": data_offsets must be [begin, end]";
  e.begin = natural(offsets[0], what, at + " data_offsets");
  e.end = natural(offsets[1], what, at + " data_offsets");
  DTRAIN_INPUT_CHECK(e.begin <= e.end && e.end <= data_bytes)
      << what << ": " << at << " has data_offsets [" << e.begin << ", " << e.end
      << "] outside the data section of " << data_bytes << " bytes";
  DTRAIN_INPUT_CHECK(e.end - e.begin == elements * 4)
      << what << ": " << at << " has shape " << e.shape.str() << " (" << elements * 4
      << " bytes) but data_offsets [" << e.begin << ", " << e.end << "] hold " << e.end - e.begin;
  return e;
}

std::vector<std::pair<std::string, Shape>> shapes_of(const NamedTensors& tensors) {
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const NamedTensor& t : tensors) {
    DTRAIN_CHECK(static_cast<int64_t>(t.values.size()) == t.shape.numel())
        << "tensor '" << t.name << "' has " << t.values.size() << " values for shape "
        << t.shape.str();
    shapes.emplace_back(t.name, t.shape);
  }
  return shapes;
}

// Writes the header, then each tensor's bytes from `bytes_of(k)`, into a temporary file beside
// `path`, then renames it: a reader never sees half a file, an old file stays whole until then.
void write_file(const std::string& path, const std::string& header, size_t count,
                const std::function<std::pair<const char*, size_t>(size_t)>& bytes_of) {
  const std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (size_t k = 0; k < count && out; ++k) {
      const auto [data, size] = bytes_of(k);
      out.write(data, static_cast<std::streamsize>(size));
    }
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw Error("cannot write " + temporary);
    }
  }
  std::filesystem::rename(temporary, path);
}

}  // namespace

namespace {

// The length field and the JSON header (padded to a multiple of 8 bytes), and the data bytes
// that follow it.
std::string header_bytes(const std::vector<std::pair<std::string, Shape>>& tensors,
                         const TensorMetadata& metadata, uint64_t* data_bytes) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& [name, shape] : tensors) {
    DTRAIN_CHECK(names.insert(name).second) << "tensor '" << name << "' named twice";
    const uint64_t bytes = static_cast<uint64_t>(shape.numel()) * sizeof(float);
    header[name] = {
        {"dtype", "F32"}, {"shape", shape.dims()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(kLengthBytes, '\0');
  const uint64_t length = text.size();
  std::memcpy(out.data(), &length, kLengthBytes);
  *data_bytes = offset;
  return out + text;
}

}  // namespace

std::string encode_safetensors(const NamedTensors& tensors, const TensorMetadata& metadata) {
  uint64_t data_bytes = 0;
  std::string out = header_bytes(shapes_of(tensors), metadata, &data_bytes);
  out.reserve(out.size() + data_bytes);
  for (const NamedTensor& t : tensors)
    out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
  return out;
}

NamedTensors decode_safetensors(const std::string& bytes, const std::string& what,
                                TensorMetadata* metadata) {
  DTRAIN_INPUT_CHECK(bytes.size() >= kLengthBytes)
      << what << ": not a safetensors file (" << bytes.size()
      << " bytes, fewer than its 8-byte header length)";
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), kLengthBytes);
  DTRAIN_INPUT_CHECK(length >= 2 && length <= kMaxHeaderBytes &&
                     length <= bytes.size() - kLengthBytes)
      << what << ": not a safetensors file (its header length " << length << " does not fit its "
      << bytes.size() << " bytes)";
  Json header;
  try {
    header = Json::parse(bytes.begin() + kLengthBytes,
                         bytes.begin() + static_cast<std::ptrdiff_t>(kLengthBytes + length));
  } catch (const Json::exception& e) {  // a syntax error, or a number out of range (1e400)
    throw InputError(what + ": not a safetensors file (its header is not valid JSON: " + e.what() +
                     ")");
  }
  DTRAIN_INPUT_CHECK(header.is_object())
      << what << ": not a safetensors file (its header is not a JSON map)";
  const uint64_t data_bytes = bytes.size() - kLengthBytes - length;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      DTRAIN_INPUT_CHECK(info.is_object()) << what << ": __metadata__ must be a map of strings";
      for (const auto& [key, value] : info.items()) {
        DTRAIN_INPUT_CHECK(value.is_string())
            << what << ": __metadata__." << key << " must be a string, got " << value.dump();
        if (metadata) (*metadata)[key] = value.get<std::string>();
      }
      continue;
    }
    entries.push_back(read_entry(name, info, what, data_bytes));
  }
  // The data section is the tensors back to back: no overlap, no gap, nothing after them.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  uint64_t expected = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    DTRAIN_INPUT_CHECK(e.begin >= expected)
        << what << ": tensors '" << entries[i - 1].name << "' and '" << e.name
        << "' overlap in the data section";
    DTRAIN_INPUT_CHECK(e.begin == expected)
        << what << ": a gap of " << e.begin - expected << " bytes in the data section before '"
        << e.name << "'";
    expected = e.end;
  }
  DTRAIN_INPUT_CHECK(expected == data_bytes)
      << what << ": " << data_bytes - expected
      << " bytes of the data section belong to no tensor (truncated header or damaged file)";
  NamedTensors tensors;
  tensors.reserve(entries.size());
  const char* data = bytes.data() + kLengthBytes + length;
  for (Entry& e : entries) {
    NamedTensor t{std::move(e.name), std::move(e.shape), {}};
    t.values.resize((e.end - e.begin) / sizeof(float));
    if (!t.values.empty()) std::memcpy(t.values.data(), data + e.begin, e.end - e.begin);
    tensors.push_back(std::move(t));
  }
  return tensors;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const TensorMetadata& metadata) {
  // Tensor by tensor into the file: no second copy of the weights in memory.
  uint64_t data_bytes = 0;
  const std::string header = header_bytes(shapes_of(tensors), metadata, &data_bytes);
  write_file(path, header, tensors.size(), [&](size_t k) {
    const std::vector<float>& v = tensors[k].values;
    return std::pair{reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
  });
}

void write_safetensors(const std::string& path, const std::vector<TensorSource>& tensors,
                       const TensorMetadata& metadata) {
  std::vector<std::pair<std::string, Shape>> shapes;
  // (tensor, first element) of each part, in file order.
  std::vector<std::pair<size_t, int64_t>> parts;
  for (size_t k = 0; k < tensors.size(); ++k) {
    shapes.emplace_back(tensors[k].name, tensors[k].shape);
    for (int64_t begin = 0; begin < tensors[k].shape.numel(); begin += kTensorSourcePart)
      parts.emplace_back(k, begin);
  }
  uint64_t data_bytes = 0;
  const std::string header = header_bytes(shapes, metadata, &data_bytes);
  std::vector<float> buffer(kTensorSourcePart);
  write_file(path, header, parts.size(), [&](size_t i) {
    const auto [k, begin] = parts[i];
    const int64_t count = std::min(kTensorSourcePart, tensors[k].shape.numel() - begin);
    tensors[k].fill(buffer.data(), begin, count);
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    return std::pair{reinterpret_cast<const char*>(buffer.data()), bytes};
  });
}

NamedTensors read_safetensors(const std::string& path, TensorMetadata* metadata) {
  std::error_code error;
  DTRAIN_INPUT_CHECK(std::filesystem::is_regular_file(path, error)) << path << ": no such file";
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  DTRAIN_INPUT_CHECK(!in.bad()) << path << ": cannot be read";
  return decode_safetensors(bytes, path, metadata);
}

}  // namespace dtrain
