#include "backend/cuda/device_passes.h"

#include <map>
#include <stdexcept>  // logic_error: a name registered twice

namespace dtrain::cuda {
namespace {

// Filled by static initialisers while the plugin loads, read afterwards: no lock needed.
std::map<std::string, DevicePass>& table() {
  static std::map<std::string, DevicePass> passes;
  return passes;
}

}  // namespace

bool register_device_pass(const std::string& name, const DevicePass& pass) {
  if (!table().emplace(name, pass).second)
    throw std::logic_error("CUDA pass " + name + " is registered twice");
  return true;
}

const DevicePass* find_device_pass(const std::string& name) {
  const auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

}  // namespace dtrain::cuda
