"""python_configure(): the Python that //python builds for, as @python;
nanobind_configure(): nanobind's sources (third_party/nanobind/, from
scripts/setup_nanobind.sh) as @nanobind, or a stand-in that skips //python.

The interpreter is $MIXRT_PYTHON, else /usr/bin/python3 (Debian's, with
python3-dev, python3-numpy and python3-pytest from scripts/setup.sh). The
rule asks it for its header directory and extension suffix, links the
headers in as @python//:headers, and writes @python//:defs.bzl with
PYTHON (the interpreter's path) and EXTENSION_SUFFIX (".cpython-311-
x86_64-linux-gnu.so"). Without an interpreter or its headers, HAVE_PYTHON
is False and //python's targets are skipped with the reason.
"""

_QUERY = "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))"

def _python_configure_impl(ctx):
    python = ctx.os.environ.get("MIXRT_PYTHON", "/usr/bin/python3")
    reason = ""
    include = ""
    suffix = ".so"
    if not ctx.path(python).exists:
        reason = "no Python interpreter at " + python
    else:
        result = ctx.execute([python, "-c", _QUERY], timeout = 60)
        if result.return_code != 0:
            reason = python + " failed: " + result.stderr
        else:
            lines = result.stdout.strip().split("\n")
            include = lines[0]
            suffix = lines[1]
            if not ctx.path(include + "/Python.h").exists:
                reason = "no Python.h in " + include + " (install python3-dev)"
    if reason == "":
        ctx.symlink(include, "include")
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
)
""")
    else:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
# Stands in for the headers and is compatible with no platform, so what
# depends on it is skipped (as @cuda's stub, cuda_configure.bzl).
constraint_setting(name = "interpreter")

constraint_value(
    name = "missing",
    constraint_setting = ":interpreter",
)

cc_library(
    name = "headers",
    target_compatible_with = [":missing"],
)
""")
    ctx.file("defs.bzl", "HAVE_PYTHON = {}\nPYTHON = {}\nEXTENSION_SUFFIX = {}\nMISSING_REASON = {}\n".format(
        reason == "",
        repr(python),
        repr(suffix),
        repr(reason),
    ))

python_configure = repository_rule(
    implementation = _python_configure_impl,
    environ = ["MIXRT_PYTHON"],
    local = True,
)

def _nanobind_configure_impl(ctx):
    third_party = ctx.path(Label("//third_party:nanobind.BUILD")).dirname
    source = third_party.get_child("nanobind")
    combined = source.get_child("nanobind").get_child("src").get_child("nb_combined.cpp")
    if combined.exists:
        ctx.symlink(source.get_child("nanobind"), "nanobind")
        ctx.symlink(Label("//third_party:nanobind.BUILD"), "BUILD")
    else:
        # No sources (scripts/setup_nanobind.sh did not run, or PyPI was
        # unreachable): a stand-in compatible with no platform, so //python
        # is skipped, as @cuda's stub skips the CUDA targets.
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

constraint_setting(name = "sources")

constraint_value(
    name = "missing",
    constraint_setting = ":sources",
)

cc_library(
    name = "nanobind",
    target_compatible_with = [":missing"],
)
""")

nanobind_configure = repository_rule(
    implementation = _nanobind_configure_impl,
    local = True,
)
