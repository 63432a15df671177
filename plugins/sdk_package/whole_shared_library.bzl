"""A shared library holding every object of its deps."""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _whole_shared_library_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )

    # cc_binary(linkshared) keeps only the objects something references, and
    # a library's users reference everything: link every object of every
    # library below, and the system libraries' flags (-labsl_..., -ldl).
    objects = []
    flags = []
    for dep in ctx.attr.deps:
        for linker_input in dep[CcInfo].linking_context.linker_inputs.to_list():
            flags.extend(linker_input.user_link_flags)
            for library in linker_input.libraries:
                objects.extend(library.pic_objects or library.objects)
    outputs = cc_common.link(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = cc_common.create_compilation_outputs(
            pic_objects = depset(objects),
            objects = depset(objects),
        ),
        user_link_flags = [
            "-Wl,-soname," + ctx.attr.soname,
            "-Wl,--version-script=" + ctx.file.version_script.path,
            "-Wl,--no-undefined",
        ] + flags,
        additional_inputs = [ctx.file.version_script],
        name = ctx.label.name,
        output_type = "dynamic_library",
    )
    library = outputs.library_to_link.resolved_symlink_dynamic_library or \
              outputs.library_to_link.dynamic_library
    return [DefaultInfo(
        files = depset([library]),
        runfiles = ctx.runfiles(files = [library]),
    )]

# whole_shared_library(name, deps, soname, version_script): lib<name>.so
# with every object of the deps' libraries (transitively), the SONAME given,
# exporting what the version script names, every symbol resolved.
whole_shared_library = rule(
    implementation = _whole_shared_library_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo]),
        "soname": attr.string(mandatory = True),
        "version_script": attr.label(allow_single_file = True, mandatory = True),
        "_cc_toolchain": attr.label(
            default = Label("@bazel_tools//tools/cpp:current_cc_toolchain"),
        ),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
)
