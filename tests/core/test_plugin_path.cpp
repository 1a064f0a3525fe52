// Finding the plugins (core/plugin_path.h): the places looked in, in order, and the errors that
// name them.
#include <doctest/doctest.h>

#include <dlfcn.h>   // dlclose
#include <unistd.h>  // getpid: a scratch file of this process

#include <filesystem>
#include <fstream>
#include <string>

#include "core/plugin_path.h"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("plugins are looked for next to the program, in ../lib beside it, then in the build") {
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  const auto paths = plugin_paths("libx.so", "/build/lib/libx.so");
  REQUIRE(paths.size() == 3);
  CHECK(paths[0] == exe.parent_path() / "libx.so");
  CHECK(paths[1] == exe.parent_path().parent_path() / "lib" / "libx.so");
  CHECK(paths[2] == fs::path("/build/lib/libx.so"));
  CHECK(plugin_paths("libx.so", "").size() == 2);
}

TEST_CASE("a missing plugin's error names every path tried") {
  const std::string file = "libdtrain_no_such_plugin.so";
  const OpenedPlugin plugin = open_plugin(file, "/nowhere/" + file, "the test plugin");
  CHECK(plugin.handle == nullptr);
  CHECK(contains(plugin.error, "the test plugin " + file + " is missing (not at "));
  for (const fs::path& path : plugin_paths(file, "/nowhere/" + file))
    CHECK(contains(plugin.error, path.string()));
  CHECK(contains(plugin.error, "nor on the library path"));
}

TEST_CASE("a plugin that is there but cannot be loaded is named, with the linker's reason") {
  const fs::path junk =
      fs::temp_directory_path() / ("dtrain_junk_plugin_" + std::to_string(getpid()) + ".so");
  std::ofstream(junk) << "not a shared library";
  const OpenedPlugin plugin = open_plugin("libdtrain_junk.so", junk.string(), "the test plugin");
  fs::remove(junk);
  CHECK(plugin.handle == nullptr);
  CHECK(plugin.path == junk.string());
  CHECK(contains(plugin.error, "the test plugin " + junk.string() + " cannot be loaded: "));
}

TEST_CASE("a plugin on the library path is found there") {
  const OpenedPlugin plugin = open_plugin("libz.so.1", "", "zlib");  // dtrain links zlib
  REQUIRE(plugin.handle != nullptr);
  CHECK(plugin.path == "libz.so.1");
  CHECK(plugin.error.empty());
  dlclose(plugin.handle);
}
