#include "backend/cuda_plugin.h"

#include <dlfcn.h>  // dlopen, dlsym

#include <string>

#include "core/plugin_path.h"  // open_plugin: where the plugin may be; dl_error

namespace dtrain {
namespace {

constexpr const char* kPluginFile = "libdtrain_cuda.so";
#ifdef DTRAIN_CUDA_PLUGIN_BUILD_PATH
constexpr const char* kPluginBuildPath = DTRAIN_CUDA_PLUGIN_BUILD_PATH;  // the build tree's
#else
constexpr const char* kPluginBuildPath = "";
#endif

struct Plugin {
  bool loaded = false;
  void* handle = nullptr;  // for dlsym; RTLD_DEFAULT when the program links the plugin
  std::string path;        // for messages
  std::string error;       // why it is not loaded
};

Plugin load_plugin() {
  Plugin plugin;
  // Linked into the program (the CUDA test binaries): its symbols are in reach already, and a
  // second copy must not be loaded beside it.
  if (dlsym(RTLD_DEFAULT, "dtrain_cuda_plugin_abi")) {
    plugin.loaded = true;
    plugin.handle = RTLD_DEFAULT;
    plugin.path = kPluginFile;
    return plugin;
  }
  // Next to the program, in ../lib beside it, in the build tree, on the library path (RTLD_NOW:
  // a symbol that the program does not provide is an error here, not a crash later).
  OpenedPlugin opened = open_plugin(kPluginFile, kPluginBuildPath, "the CUDA plugin");
  plugin.path = opened.path;
  plugin.handle = opened.handle;
  if (!plugin.handle) {
    plugin.error = opened.error;
    return plugin;
  }
  using AbiFunction = int (*)();
  const auto abi = reinterpret_cast<AbiFunction>(dlsym(plugin.handle, "dtrain_cuda_plugin_abi"));
  if (!abi || abi() != kCudaPluginAbi) {
    plugin.error = "the CUDA plugin " + plugin.path + " belongs to another build of dtrain (ABI " +
                   (abi ? std::to_string(abi()) : std::string("unknown")) + ", this dtrain's " +
                   std::to_string(kCudaPluginAbi) + ")";
    dlclose(plugin.handle);
    plugin.handle = nullptr;
    return plugin;
  }
  plugin.loaded = true;
  return plugin;
}

}  // namespace

bool cuda_driver_sees_gpu(std::string* why) {
  // The driver API by hand, cuda.h staying out of host code: a CUresult is an int, 0 success.
  using CuInit = int (*)(unsigned int flags);
  using CuDeviceGetCount = int (*)(int* count);
  using CuGetErrorString = int (*)(int status, const char** text);
  const auto fail = [why](const std::string& reason) {
    if (why) *why = "no usable CUDA driver or GPU (" + reason + ")";
    return false;
  };
  // Never unloaded: the runtime uses it next, and a driver is not made to be unloaded after
  // cuInit. Where there is no GPU there is usually no driver either, and nothing stays mapped.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) return fail(dl_error());
  const auto cu_init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  const auto cu_device_get_count =
      reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  const auto cu_get_error_string =
      reinterpret_cast<CuGetErrorString>(dlsym(driver, "cuGetErrorString"));
  if (!cu_init || !cu_device_get_count) return fail("libcuda.so.1 lacks cuInit");
  int count = 0;
  int status = cu_init(0);
  if (status == 0) status = cu_device_get_count(&count);
  if (status != 0) {
    const char* text = nullptr;
    if (!cu_get_error_string || cu_get_error_string(status, &text) != 0 || !text)
      return fail("CUresult " + std::to_string(status));
    return fail(text);
  }
  if (count == 0) {
    if (why) *why = "no CUDA GPU is visible";
    return false;
  }
  return true;
}

void* cuda_plugin_symbol(const char* name, std::string* why) {
  static const Plugin plugin = load_plugin();  // once: loading is neither cheap nor undone
  if (!plugin.loaded) {
    if (why) *why = plugin.error;
    return nullptr;
  }
  void* symbol = dlsym(plugin.handle, name);
  if (!symbol && why) *why = "the CUDA plugin " + plugin.path + " lacks " + name;
  return symbol;
}

const CudaBackendEntry* cuda_backend_entry(std::string* why) {
  using EntryFunction = const CudaBackendEntry* (*)();
  const auto entry =
      reinterpret_cast<EntryFunction>(cuda_plugin_symbol("dtrain_cuda_backend_entry", why));
  return entry ? entry() : nullptr;
}

}  // namespace dtrain
