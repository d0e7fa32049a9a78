// hetpool-inventory: prints this machine's accelerators as JSON (the agent's discovery, without
// the agent): every backend whose vendor library loads, completed from sysfs, with fingerprints.
//   hetpool-inventory [--backend auto|nvml|cndev|mxsml|levelzero|sysfs|sim ...] [--inventory FILE]
//                     [--spec-table FILE] [--sysfs-root DIR]
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "drivers/backend_factory.h"
#include "drivers/inventory_json.h"

int main(int argc, char** argv) {
  hetpool::drivers::BackendOptions options;
  hetpool::drivers::CollectOptions collect;
  std::vector<std::string> names;
  std::string spec_file;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (arg == flag && i + 1 < argc) return argv[++i];
      return nullptr;
    };
    if (const char* backend = value("--backend")) {
      names.emplace_back(backend);
    } else if (const char* inventory = value("--inventory")) {
      options.sim_inventory_path = inventory;
    } else if (const char* specs_path = value("--spec-table")) {
      spec_file = specs_path;
    } else if (const char* root = value("--sysfs-root")) {
      options.sysfs_root = root;
      collect.sysfs_root = root;
    } else if (arg == "--help" || arg == "-h") {
      std::cout << "hetpool-inventory [--backend NAME]... [--inventory FILE] [--spec-table FILE] [--sysfs-root DIR]\n"
                   "Prints the accelerators hetpool-agent would report, with fingerprints, as JSON.\n";
      return 0;
    } else {
      std::cerr << "hetpool-inventory: unknown argument " << arg << "\n";
      return 2;
    }
  }
  if (!names.empty()) options.names = names;
  options.note = [](const std::string& line) { std::cerr << "hetpool-inventory: " << line << "\n"; };
  hetpool::drivers::SpecTable specs = hetpool::drivers::SpecTable::Defaults();
  if (!spec_file.empty()) {
    std::ifstream in(spec_file);
    std::stringstream text;
    text << in.rdbuf();
    if (auto s = specs.MergeJson(text.str()); !s.ok()) {
      std::cerr << "hetpool-inventory: " << spec_file << ": " << s.message() << "\n";
      return 2;
    }
  }
  collect.specs = &specs;
  auto backends = hetpool::drivers::CreateBackends(options);
  if (!backends.ok()) {
    std::cerr << "hetpool-inventory: " << backends.status().message() << "\n";
    return 2;
  }
  auto inventory = hetpool::drivers::CollectInventory(*backends, collect);
  if (!inventory.ok()) {
    std::cerr << "hetpool-inventory: " << inventory.status().message() << "\n";
    return 1;
  }
  std::cout << hetpool::drivers::InventoryToJson(*inventory).dump(2) << "\n";
  return 0;
}
