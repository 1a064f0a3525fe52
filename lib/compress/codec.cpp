// make_codec: the name → codec table.
#include "compress/codec.h"

#include <fmt/format.h>  // fmt::join: the known names in the error message

#include "compress/codecs.h"  // NoneCodec, Truncate16Codec, Quantize8Codec
#include "core/error.h"       // DTRAIN_INPUT_CHECK

namespace dtrain {

const std::vector<std::string>& codec_names() {
  static const std::vector<std::string> names{"none", "truncate16", "quantize8"};
  return names;
}

std::unique_ptr<Codec> make_codec(const std::string& name) {
  if (name == "none") return std::make_unique<NoneCodec>();
  if (name == "truncate16") return std::make_unique<Truncate16Codec>();
  if (name == "quantize8") return std::make_unique<Quantize8Codec>();
  DTRAIN_INPUT_CHECK(false) << fmt::format("compression.name: expected one of {}, got '{}'",
                                           fmt::join(codec_names(), ", "), name);
  return nullptr;  // not reached: the check throws
}

}  // namespace dtrain
