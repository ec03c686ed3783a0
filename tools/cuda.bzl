"""cuda_objects: .cu files compiled by nvcc (one genrule per file), wrapped in a cc_library.

Bazel 4.2.3 has no CUDA rules offline, so each .cu file becomes one object file through a
genrule that calls the toolkit's nvcc (/usr/local/cuda, CUDA 13), and a cc_library links the
objects with cudart. Every target made here is tagged "manual": the default build needs no CUDA
toolkit; .ci/run builds the CUDA targets by name where nvcc exists.

Code: sm_90 machine code (H100) plus compute_90 PTX (JIT-compiled by the driver on newer GPUs),
-O3, C++17, no fast math (results must match the CPU kernels to stated tolerances).

    load("//tools:cuda.bzl", "cuda_objects")
    cuda_objects(
        name = "elementwise_kernels",
        srcs = ["elementwise_kernels.cu"],        # one object per file
        hdrs = ["elementwise_kernels.h"],         # the plain C++ interface (no device code)
        cu_deps = ["kernel_util.cuh"],            # headers only the .cu files include
    )
"""

NVCC = "/usr/local/cuda/bin/nvcc"

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-Xcompiler",
    "-fPIC",
    "-gencode",
    "'arch=compute_90,code=[sm_90,compute_90]'",
    "-I.",
    "-I$(GENDIR)",
]

def cuda_objects(name, srcs, hdrs = [], cu_deps = [], deps = [], visibility = None, tags = []):
    """Compiles each .cu in srcs with nvcc and makes cc_library `name` of the objects.

    Args:
      name: the cc_library.
      srcs: .cu files (each compiled on its own).
      hdrs: public headers (plain C++) of the library; also visible to the .cu files.
      cu_deps: further files the .cu files include (private headers).
      deps: cc deps of the library (cudart is always added).
      visibility: of the cc_library.
      tags: added to "manual".
    """
    objects = []
    for src in srcs:
        if not src.endswith(".cu"):
            fail("cuda_objects: %s is not a .cu file" % src)
        stem = src[:-len(".cu")]
        obj = "_cuda_objects/%s/%s.o" % (name, stem)
        native.genrule(
            name = "%s_%s_nvcc" % (name, stem.replace("/", "_")),
            srcs = [src] + hdrs + cu_deps,
            outs = [obj],
            cmd = "%s %s -c $(location %s) -o $@" % (NVCC, " ".join(NVCC_FLAGS), src),
            message = "nvcc %s" % src,
            tags = ["manual"] + tags,
        )
        objects.append(obj)
    native.cc_library(
        name = name,
        srcs = objects,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart"],
        linkstatic = True,
        visibility = visibility,
        tags = ["manual"] + tags,
    )
