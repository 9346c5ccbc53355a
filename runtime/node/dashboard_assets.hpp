#pragma once

// The dashboard's files (`GET /dashboard`, `/dashboard/NAME`): the page,
// its script and its styles, embedded in the binary at build time from
// runtime/node/dashboard/ (nothing is fetched from elsewhere at run time).

#include <string_view>

namespace sluice::node {

struct dashboard_asset {
  /// The name after "/dashboard/" ("" for the page itself).
  std::string_view name;
  std::string_view content_type;
  std::string_view body;
};

/// The asset called `name`, or null.
const dashboard_asset* find_dashboard_asset(std::string_view name);

/// The Content-Security-Policy every asset is served with: the page's own
/// script and styles only, requests to its own origin only, no framing.
constexpr std::string_view dashboard_csp =
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'";

} // namespace sluice::node
