"""mpirun_test(): a binary run by mpirun_test.sh on `ranks` ranks, as a test."""

def mpirun_test(name, binary, ranks = 2, args = [], env = {}, **kwargs):
    native.sh_test(
        name = name,
        srcs = ["mpirun_test.sh"],
        args = [str(ranks), "$(location %s)" % binary] + args,
        data = [binary],
        env = dict({"MIXRT_CPU_SKIP_PROBE": "1"}, **env),
        **kwargs
    )
