"""mixrt_plugin(): builds libmixrt_<name>.so exporting only the ABI symbols."""

def mixrt_plugin(name, srcs = [], deps = [], copts = [], linkopts = [], **kwargs):
    """A backend plugin shared object, libmixrt_<name>.so.

    A linker version script keeps the dynamic symbol table to the two entry
    points of include/mixrt/plugin_api.h: with -fvisibility=hidden
    alone, ~150 std:: symbols leak out and can clash between plugins.
    """
    native.cc_binary(
        name = "libmixrt_%s.so" % name,
        srcs = srcs,
        deps = deps,
        copts = copts + ["-fvisibility=hidden"],
        linkshared = True,
        linkopts = linkopts + [
            "-Wl,--version-script=$(location //plugins/sdk:plugin_exports.lds)",
            "-Wl,--no-undefined",
        ],
        additional_linker_inputs = ["//plugins/sdk:plugin_exports.lds"],
        **kwargs
    )
