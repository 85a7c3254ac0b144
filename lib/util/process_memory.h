// This process's memory as the kernel counts it.
#pragma once

namespace xtrain::util {

// The most resident memory this process has held so far, in MiB.
double peak_rss_mib();

}  // namespace xtrain::util
