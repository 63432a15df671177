"""One cc_test per name for a core layer's test folder, with the deps they share."""

def core_tests(names):
    for name in names:
        native.cc_test(
            name = name,
            srcs = [name + ".cc"],
            deps = [
                "//core",
                "//plugins/sdk:philox",
                "//tests:op_test_util",
                "//tests:test_plugins",
                "//third_party:absl",
                "//third_party:gtest",
                "//third_party:gtest_main",
            ],
        )
