// Finding and opening dtrain's plugins, the shared libraries that hold what only some runs need
// (libdtrain_cuda.so: the CUDA code; libdtrain_image.so: OpenCV's image decoding), so that a run
// that does not need them never maps them or the libraries they link.
#pragma once
#include <filesystem>  // path: the candidates
#include <string>
#include <vector>

namespace dtrain {

// Where the plugin `file` may be, in order: next to the running program and in ../lib beside it
// (an installation; the bundle of scripts/gpu_check.sh), then `build_path`, where the build tree
// put it (none when empty).
std::vector<std::filesystem::path> plugin_paths(const std::string& file,
                                                const std::string& build_path);

// A plugin opened by open_plugin: the handle, for dlsym, and where it was found, for messages;
// or, when it could not be opened, a null handle and why.
struct OpenedPlugin {
  void* handle = nullptr;
  std::string path;
  std::string error;
};

// dlopen (RTLD_NOW | RTLD_LOCAL: a symbol the plugin cannot bind is an error here, not a crash
// later) of the first of plugin_paths(file, build_path) that exists, else of `file` on the
// dynamic linker's search path (LD_LIBRARY_PATH, ld.so.cache). `what` ("the CUDA plugin") begins
// the error, which names every path tried when the plugin is nowhere.
OpenedPlugin open_plugin(const std::string& file, const std::string& build_path,
                         const std::string& what);

// dlerror()'s text, or "unknown error".
std::string dl_error();

}  // namespace dtrain
