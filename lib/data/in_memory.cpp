#include "data/in_memory.h"

#include "core/error.h"  // DTRAIN_CHECK
#include "core/rng.h"    // random_bits: per-(epoch, index) augmentation draws

namespace dtrain {

void ByteImages::truncate(int64_t n) {
  DTRAIN_CHECK(n >= 0 && n <= size()) << "truncate(" << n << ") of " << size() << " samples";
  labels.resize(n);
  labels.shrink_to_fit();
  pixels.resize(n * shape.numel());
  pixels.shrink_to_fit();
}

InMemoryDataset::InMemoryDataset(ByteImages images, int64_t classes, const Normalization& norm,
                                 std::optional<PadCropFlip> augment, uint64_t seed,
                                 std::string description)
    : images_(std::move(images)),
      classes_(classes),
      lut_(norm),
      augment_(augment),
      seed_(seed),
      description_(std::move(description)) {
  DTRAIN_CHECK(images_.shape.rank() == 3 && static_cast<int64_t>(images_.pixels.size()) ==
                                                images_.size() * images_.shape.numel())
      << "pixels do not match " << images_.size() << " × " << images_.shape.str();
}

int32_t InMemoryDataset::load(int64_t index, float* out, int64_t epoch) const {
  DTRAIN_CHECK(index >= 0 && index < size()) << "sample " << index << " of " << size();
  const int64_t numel = images_.shape.numel();
  const uint8_t* src = images_.pixels.data() + index * numel;
  if (augment_) {
    load_augmented(src, out, index, epoch);
  } else {
    const int64_t plane = images_.shape[1] * images_.shape[2];
    for (int64_t c = 0; c < images_.shape[0]; ++c) {
      const float* lut = lut_.channel(c);
      const uint8_t* s = src + c * plane;
      float* o = out + c * plane;
      for (int64_t i = 0; i < plane; ++i) o[i] = lut[s[i]];
    }
  }
  return images_.labels[index];
}

void InMemoryDataset::load_augmented(const uint8_t* src, float* out, int64_t index,
                                     int64_t epoch) const {
  const int64_t C = images_.shape[0], H = images_.shape[1], W = images_.shape[2];
  const int64_t pad = augment_->pad, span = 2 * pad + 1;
  uint64_t bits = random_bits(seed_, stream_id(RngStream::augment, static_cast<uint64_t>(epoch)),
                              static_cast<uint64_t>(index));
  // Output (y, x) reads padded (y + dy, x' + dx), x' = x or W-1-x; padded = source shifted by pad.
  const int64_t dy = static_cast<int64_t>(bits % span) - pad;
  const int64_t dx = static_cast<int64_t>((bits >> 16) % span) - pad;
  const bool flip = augment_->flip && ((bits >> 32) & 1);
  for (int64_t c = 0; c < C; ++c) {
    const float* lut = lut_.channel(c);
    const float zero = lut[0];  // padding is black before normalisation, as in torchvision
    for (int64_t y = 0; y < H; ++y) {
      float* o = out + (c * H + y) * W;
      const int64_t sy = y + dy;
      if (sy < 0 || sy >= H) {
        for (int64_t x = 0; x < W; ++x) o[x] = zero;
        continue;
      }
      const uint8_t* row = src + (c * H + sy) * W;
      for (int64_t x = 0; x < W; ++x) {
        const int64_t sx = (flip ? W - 1 - x : x) + dx;
        o[x] = (sx < 0 || sx >= W) ? zero : lut[row[sx]];
      }
    }
  }
}

}  // namespace dtrain
