"""olrun_launcher: the launcher script as an executable target that also puts itself at
tools/olrun in the runfiles of whoever depends on it (the path the repository uses), e.g.

    olrun_launcher(name = "olrun", src = "olrun.py", deps = ["slurm.py"])
    sh_test(..., data = ["//tools/launcher:olrun"])   # the test runs tools/olrun

`bazel run //tools/launcher:olrun -- --help` works too."""

def _olrun_launcher_impl(ctx):
    executable = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.symlink(output = executable, target_file = ctx.file.src, is_executable = True)
    runfiles = ctx.runfiles(files = [ctx.file.src] + ctx.files.deps, symlinks = {"tools/olrun": ctx.file.src})
    return [DefaultInfo(executable = executable, runfiles = runfiles)]

olrun_launcher = rule(
    implementation = _olrun_launcher_impl,
    attrs = {
        "src": attr.label(allow_single_file = [".py"], mandatory = True),
        "deps": attr.label_list(allow_files = [".py"]),  # modules olrun.py imports, beside it
    },
    executable = True,
)
