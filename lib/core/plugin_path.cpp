#include "core/plugin_path.h"

#include <dlfcn.h>  // dlopen, dlerror

#include <system_error>  // error_code: a missing path is no exception

namespace dtrain {

std::string dl_error() {
  const char* error = dlerror();
  return error ? error : "unknown error";
}

std::vector<std::filesystem::path> plugin_paths(const std::string& file,
                                                const std::string& build_path) {
  std::vector<std::filesystem::path> paths;
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    paths.push_back(exe.parent_path() / file);
    paths.push_back(exe.parent_path().parent_path() / "lib" / file);
  }
  if (!build_path.empty()) paths.emplace_back(build_path);
  return paths;
}

OpenedPlugin open_plugin(const std::string& file, const std::string& build_path,
                         const std::string& what) {
  OpenedPlugin plugin;
  const int mode = RTLD_NOW | RTLD_LOCAL;
  std::string looked;
  for (const std::filesystem::path& path : plugin_paths(file, build_path)) {
    std::error_code error;
    if (!std::filesystem::exists(path, error)) {
      looked += (looked.empty() ? "" : ", ") + path.string();
      continue;
    }
    plugin.path = path.string();
    plugin.handle = dlopen(plugin.path.c_str(), mode);
    if (!plugin.handle)
      plugin.error = what + " " + plugin.path + " cannot be loaded: " + dl_error();
    return plugin;
  }
  plugin.path = file;
  plugin.handle = dlopen(file.c_str(), mode);
  if (!plugin.handle) {
    const std::string error = dl_error();
    // glibc's text for a library it did not find starts with the name asked for.
    const bool missing = error.rfind(file + ":", 0) == 0;
    plugin.error =
        missing ? what + " " + file + " is missing (not at " + looked + " nor on the library path)"
                : what + " cannot be loaded: " + error;
  }
  return plugin;
}

}  // namespace dtrain
