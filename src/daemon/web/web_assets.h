// The dashboard's pages, compiled into hetpoold from src/daemon/web/assets/ (cmake/EmbedAssets.cmake).
#pragma once

#include <string_view>
#include <vector>

namespace hetpool::daemon {

struct WebAsset {
  std::string_view path;  // "/index.html", "/app.js"
  std::string_view content_type;
  std::string_view data;
};

const std::vector<WebAsset>& WebAssets();

}  // namespace hetpool::daemon
