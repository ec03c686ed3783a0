"""Bazel entry point: runs pytest on the files given as arguments (paths relative to this file).
The package comes from the runfiles (//python/oneflow_like, imports = ["python"])."""
import os
import sys

import pytest

here = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("OL_PYTHONPATH", os.path.dirname(here))
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-o", "cache_dir=/tmp/ol_pytest_cache"]
                     + [os.path.join(here, f) for f in sys.argv[1:]]))
