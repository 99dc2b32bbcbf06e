"""Runtime: Kokkos lifetime, loading compiled kernels, packing arguments and launching."""
