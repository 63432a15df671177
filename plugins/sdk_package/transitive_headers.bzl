"""The headers an installed library's users compile against."""

def _transitive_headers_impl(ctx):
    # Every header the deps expose, this workspace's only: Abseil and the
    # other system libraries come from the user's own distribution. A header
    # under _virtual_includes (include_prefix) is the path users include.
    headers = [
        h
        for dep in ctx.attr.deps
        for h in dep[CcInfo].compilation_context.headers.to_list()
        if h.owner.workspace_name == "" and h.extension == "h"
    ]
    manifest = ctx.actions.declare_file(ctx.label.name + ".txt")
    ctx.actions.write(manifest, "".join([h.short_path + "\n" for h in headers]))
    return [DefaultInfo(
        files = depset([manifest]),
        runfiles = ctx.runfiles(files = headers + [manifest]),
    )]

# transitive_headers(name, deps): <name>.txt lists, one per line, the
# runfiles paths of every header of this workspace the deps expose; the
# headers themselves come along as runfiles.
transitive_headers = rule(
    implementation = _transitive_headers_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
)
