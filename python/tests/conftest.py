"""Test setup: makes `import oneflow_like` work from the source tree (or from $OL_PYTHONPATH)."""
import os
import sys

sys.path.insert(0, os.path.abspath(os.environ.get("OL_PYTHONPATH", os.path.join(os.path.dirname(__file__), ".."))))
