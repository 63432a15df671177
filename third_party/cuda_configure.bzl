"""cuda_configure(): the CUDA toolkit as the repository @cuda, when there is one.

The toolkit root is $MIXRT_CUDA_ROOT, else /usr/local/cuda. With bin/nvcc and
lib64/libcublasLt.so there, @cuda holds the toolkit (third_party/cuda.BUILD
with the root substituted). Without them, @cuda's libraries are
incompatible with every platform, so whatever is built from them (the CUDA
kernels, the GPU dispatch compiled for CUDA, their tests) is skipped by
`bazel build //...` and reported SKIPPED by `bazel test //...`, and
//backends/cuda builds libmixrt_cuda.so as a stub plugin that reports no
device and why. @cuda//:defs.bzl says which (HAVE_CUDA, CUDA_ROOT,
CUDA_COMPATIBLE for target_compatible_with).
"""

_STUB_BUILD = """
# No CUDA toolkit at {root}: these stand in for it and are incompatible with
# every platform, so their dependents are skipped (see cuda_configure.bzl).
package(default_visibility = ["//visibility:public"])

constraint_setting(name = "toolkit")

constraint_value(
    name = "missing",
    constraint_setting = ":toolkit",
)

[cc_library(
    name = name,
    target_compatible_with = [":missing"],
) for name in ["cuda_headers", "cudart", "cudart_static", "cublaslt", "nvrtc", "nccl"]]

cc_library(
    name = "missing_reason",
    hdrs = ["missing_reason.h"],
)
"""

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("MIXRT_CUDA_ROOT", "/usr/local/cuda")
    needed = [root + "/bin/nvcc", root + "/lib64/libcublasLt.so"]
    missing = [p for p in needed if not ctx.path(p).exists]
    if not missing:
        for d in ["bin", "include", "lib64"]:
            ctx.symlink(root + "/" + d, d)
        ctx.template(
            "BUILD",
            ctx.attr.build_file,
            {"/usr/local/cuda": root},
        )
        ctx.file("defs.bzl", "\n".join([
            "HAVE_CUDA = True",
            "CUDA_ROOT = %r" % root,
            "CUDA_COMPATIBLE = []",
            "",
        ]))
        return
    reason = "not built: no CUDA toolkit at %s (%s missing; set MIXRT_CUDA_ROOT)" % (
        root,
        ", ".join(missing),
    )
    ctx.file("BUILD", _STUB_BUILD.format(root = root))
    ctx.file("missing_reason.h", "#define MIXRT_CUDA_MISSING_REASON %r\n" % reason)
    ctx.file("defs.bzl", "\n".join([
        "HAVE_CUDA = False",
        "CUDA_ROOT = %r" % root,
        "CUDA_COMPATIBLE = [\"@cuda//:missing\"]",
        "",
    ]))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    attrs = {"build_file": attr.label(allow_single_file = True)},
    environ = ["MIXRT_CUDA_ROOT"],
    local = True,
)
