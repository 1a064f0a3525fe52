#include "data/byte_file.h"

#include <zlib.h>  // gzopen, gzread: plain and .gz alike

#include <cerrno>   // errno: why gzopen failed
#include <cstring>  // strerror

#include "core/error.h"  // DTRAIN_INPUT_CHECK, DTRAIN_CHECK

namespace dtrain {

std::vector<uint8_t> read_whole_file(const std::filesystem::path& file) {
  errno = 0;
  gzFile f = gzopen(file.c_str(), "rb");
  DTRAIN_INPUT_CHECK(f != nullptr) << file.string() << ": cannot open ("
                                   << (errno ? std::strerror(errno) : "out of memory") << ")";
  gzbuffer(f, 1 << 20);  // larger reads: a 47 MB idx file decompresses in ~0.2 s
  std::vector<uint8_t> bytes;
  const size_t chunk = 1 << 20;
  // gzip streams do not record their decompressed size up front; plain files do.
  std::error_code ec;
  uintmax_t on_disk = std::filesystem::file_size(file, ec);
  bytes.reserve(ec ? 0 : on_disk + chunk);  // + chunk: the last read asks for a full chunk
  for (;;) {
    size_t old = bytes.size();
    bytes.resize(old + chunk);
    int got = gzread(f, bytes.data() + old, static_cast<unsigned>(chunk));
    if (got < 0) {
      int code = 0;
      std::string why = gzerror(f, &code);
      if (code == Z_BUF_ERROR) {  // a cut-off gzip stream: keep what it held, the format check
        bytes.resize(old);        // then reports "truncated: expected N bytes, got M"
        break;
      }
      gzclose(f);
      // A damaged gzip stream is a bad input file, not a runtime failure.
      DTRAIN_INPUT_CHECK(false) << file.string() << ": read error (" << why << ")";
    }
    bytes.resize(old + static_cast<size_t>(got));
    if (static_cast<size_t>(got) < chunk) break;
  }
  gzclose(f);
  bytes.shrink_to_fit();
  return bytes;
}

std::filesystem::path find_first_file(const std::filesystem::path& dir,
                                      std::initializer_list<std::string> names) {
  for (const std::string& name : names) {
    std::filesystem::path p = dir / name;
    if (std::filesystem::is_regular_file(p)) return p;
  }
  return {};
}

}  // namespace dtrain
