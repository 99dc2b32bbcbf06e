"""Code generator: a typed kernel (KernelSource + KernelSpec) -> one C++ Kokkos translation unit."""
