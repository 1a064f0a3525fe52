// The doctest runner of the CUDA test binaries (test_cuda_ops, test_cuda_codecs). Without a
// usable GPU it runs no test case and exits 77, which CTest's SKIP_RETURN_CODE shows as
// "skipped", after saying why; a machine without a GPU thus neither passes nor fails them.
// With DTRAIN_REQUIRE_CUDA set (not 0) a missing GPU is a failure instead: for the GPU
// machine, where it would mean the driver or the device is broken.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>   // printf: the reason for skipping
#include <cstdlib>  // getenv
#include <string>

#include "backend/cuda/cuda_backend.h"  // cuda_device_usable

namespace {

// doctest's queries (--help, --version, --count, --list-*) run no test case: no GPU needed.
bool is_query(std::string arg) {
  while (!arg.empty() && arg[0] == '-') arg.erase(0, 1);
  if (arg.rfind("dt-", 0) == 0) arg.erase(0, 3);
  arg = arg.substr(0, arg.find('='));
  return arg == "h" || arg == "help" || arg == "?" || arg == "v" || arg == "version" ||
         arg == "c" || arg == "count" || arg.rfind("l", 0) == 0;
}

bool gpu_required() {
  const char* v = std::getenv("DTRAIN_REQUIRE_CUDA");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  bool query = false;
  for (int i = 1; i < argc; ++i) query = query || is_query(argv[i]);
  std::string why;
  if (!query && !dtrain::cuda_device_usable(0, &why)) {
    if (gpu_required()) {
      std::printf("no usable CUDA GPU: %s; DTRAIN_REQUIRE_CUDA is set, so this fails\n",
                  why.c_str());
      return 1;
    }
    std::printf("no usable CUDA GPU: %s; skipped\n", why.c_str());
    return 77;  // SKIP_RETURN_CODE of the CTest entry
  }
  return context.run();
}
