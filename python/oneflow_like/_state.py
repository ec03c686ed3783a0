"""Process state of `oneflow_like`: the C++ engine (op registry, compiler, the job's processes)
and caches of compiled eager plans. One per interpreter, created on import."""
import atexit
import collections
import sys

from . import _C


# Per cached runner: what its plan says of each fetched output (binding, holders), so a repeated
# op does not ask the C++ side again. Keyed by id(runner); entries leave with their runner.
runner_meta = {}


class _State:
    def __init__(self):
        self.engine = _C.Engine()
        # Eager plans and their runners, by job text (LRU): a repeated op with the same
        # signature (shapes, dtypes, placement, SBPs, attrs) reuses its compiled plan and its
        # running actors. SPMD: every process performs the same ops, so caches evict alike.
        self.plans = collections.OrderedDict()
        self.max_plans = 128
        self.local_engine = None  # local (non-global) tensors never leave this process
        self.counter = 0
        if self.engine.distributed:
            self.engine.join()

    def next_id(self):
        self.counter += 1
        return self.counter

    def runner_for(self, text, world_size=0, gradients_of=(), local=False):
        key = (text, tuple(gradients_of), local)
        entry = self.plans.get(key)
        if entry is not None:
            self.plans.move_to_end(key)
            return entry
        # The engine that runs a plan compiles it: under olrun the job's engine lowers only this
        # process's rank; the local engine lowers every rank of a local tensor's plan.
        engine = self.local() if local else self.engine
        plan = engine.compile(text, world_size=world_size, gradients_of=list(gradients_of),
                              gradients_only=bool(gradients_of))
        runner = engine.new_runner(plan)
        runner_meta[id(runner)] = {}
        self.plans[key] = runner
        while len(self.plans) > self.max_plans:
            _, old = self.plans.popitem(last=False)
            runner_meta.pop(id(old), None)
            old.close()
        return runner

    def local(self):
        """An engine whose runners run every rank in this process (for local tensors)."""
        if not self.engine.distributed:
            return self.engine
        if self.local_engine is None:
            self.local_engine = _C.Engine(False)
        return self.local_engine

    def shutdown(self):
        for runner in self.plans.values():
            try:
                runner.close()
            except Exception:  # noqa: BLE001 - ending anyway
                pass
        self.plans.clear()
        self.engine.shutdown()


STATE = _State()


def _excepthook(kind, value, tb):
    """An uncaught exception under a launcher: tell every process this rank fails (they stop with a
    message naming it) instead of waiting in the job's closing barrier."""
    _at_exit.failed = True
    try:
        if STATE.engine.distributed:
            STATE.engine.abort(f"rank {STATE.engine.rank}: uncaught {kind.__name__}: {value}")
    finally:
        _previous_hook(kind, value, tb)


_previous_hook = sys.excepthook
sys.excepthook = _excepthook


@atexit.register
def _at_exit():
    if _at_exit.failed:
        return  # an uncaught exception: the process exits non-zero; peers were told
    try:
        STATE.shutdown()
    except Exception as e:  # noqa: BLE001
        print(f"oneflow_like: shutdown failed: {e}", file=sys.stderr)


_at_exit.failed = False
