// Launch configuration of a kernel run on thread block clusters.
#pragma once

#include <cuda_runtime_api.h>

namespace flashcore::sm90 {

// The launch configuration of a cluster kernel: `ctas` CTAs in clusters of Traits::kClusterM along x.
// (Not copyable: the configuration points at its own attribute.)
template <class Traits>
struct ClusterLaunchConfig {
  cudaLaunchAttribute cluster_dim{};
  cudaLaunchConfig_t config{};
  ClusterLaunchConfig(int ctas, cudaStream_t stream) {
    cluster_dim.id = cudaLaunchAttributeClusterDimension;
    cluster_dim.val.clusterDim.x = Traits::kClusterM, cluster_dim.val.clusterDim.y = 1, cluster_dim.val.clusterDim.z = 1;
    config.gridDim = dim3(ctas), config.blockDim = dim3(Traits::kThreads);
    config.dynamicSmemBytes = Traits::kSmemBytes, config.stream = stream;
    config.attrs = &cluster_dim, config.numAttrs = 1;
  }
  ClusterLaunchConfig(const ClusterLaunchConfig&) = delete;
  ClusterLaunchConfig& operator=(const ClusterLaunchConfig&) = delete;
};

}  // namespace flashcore::sm90
