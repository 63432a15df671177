"""A fuzz target as a corpus-replay test and a libFuzzer binary."""

def mixrt_fuzz_target(name, deps, data = [], extra_args = []):
    """<name>_fuzz.cc and corpus/<name>/ become <name>_replay_test and <name>_fuzzer."""
    native.cc_library(
        name = name + "_target",
        srcs = [name + "_fuzz.cc"],
        deps = deps + [":fuzz_input"],
        alwayslink = True,
    )
    native.filegroup(
        name = name + "_corpus",
        srcs = native.glob(["corpus/" + name + "/*"]),
    )
    native.cc_test(
        name = name + "_replay_test",
        size = "small",
        args = extra_args + ["$(locations :" + name + "_corpus)"],
        data = data + [":" + name + "_corpus"],
        deps = [
            ":" + name + "_target",
            ":replay_main",
        ],
    )
    native.cc_binary(
        name = name + "_fuzzer",
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
        deps = [":" + name + "_target"],
    )
