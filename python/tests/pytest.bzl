"""ol_pytest: one py_test running pytest on `srcs` with the oneflow_like package in its runfiles."""

def ol_pytest(name, srcs, data = [], size = "small", args = None, **kwargs):
    native.py_test(
        name = name,
        srcs = ["run_pytest.py", "conftest.py"] + srcs,
        main = "run_pytest.py",
        args = args if args != None else srcs,
        data = data,
        deps = ["//python/oneflow_like"],
        python_version = "PY3",
        size = size,
        **kwargs
    )
