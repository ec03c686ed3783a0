"""nn.Graph: subclass, assign modules, add_optimizer, write build(); the first call traces build()
into one logical job (the compiler's text format), compiles it (autograd, optimizer, SBP search,
boxing, pipeline, memory plan) and later calls run the compiled plan through the actor runtime.

    class TrainGraph(ol.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(ol.optim.AdamW(model.parameters(), lr=3e-4))
            self.config.set_gradient_accumulation_steps(2)   # micro-batches
        def build(self, x, y):
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            return loss
"""
import numpy as np


from .. import _C, _job
from .. import sbp as sbp_mod
from .. import _graph_trace
from .._state import STATE
from ..tensor import Tensor, _c, local_ranks
from .module import Module


class GraphConfig:
    def __init__(self):
        self.micro_batches = 1
        self.gradient_accumulation_steps = 1
        self.zero_stage = 0
        self.recompute = False
        self.seed = 0

    def set_gradient_accumulation_steps(self, n):
        """OneFlow's name: each call's batch is split along axis 0 into n micro-batches whose
        gradients are summed before one update (and which stream through pipeline stages)."""
        self.micro_batches = int(n)

    def set_micro_batches(self, n):
        self.micro_batches = int(n)

    def set_accumulation_calls(self, n):
        """Separate calls whose gradients accumulate before one update (the job's
        gradient_accumulation_steps): the graph updates every n-th call."""
        self.gradient_accumulation_steps = int(n)

    def enable_zero(self, mode=True, stage=1):
        """ZeRO-1 (stage=1): optimizer state sharded over the data-parallel axis;
        stage=2: also the parameters stored sharded, all-gathered at their first use
        (FSDP's SHARD_GRAD_OP)."""
        self.zero_stage = int(stage) if mode else 0

    def enable_recompute(self, mode=True):
        """Recompute every op's activations in backward (less memory, more compute)."""
        self.recompute = bool(mode)

    def text(self, name):
        items = [f'name="{name}"']
        if self.micro_batches > 1:
            items.append(f"micro_batches={self.micro_batches}")
        if self.gradient_accumulation_steps > 1:
            items.append(f"gradient_accumulation_steps={self.gradient_accumulation_steps}")
        if self.zero_stage:
            items.append(f"zero_stage={self.zero_stage}")
        if self.seed:
            items.append(f"seed={self.seed}")
        return f"config({', '.join(items)})"


class Graph:
    def __init__(self):
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "config", GraphConfig())
        object.__setattr__(self, "_optimizers", [])
        object.__setattr__(self, "_runner", None)
        object.__setattr__(self, "_job_text", None)
        object.__setattr__(self, "_outputs", None)
        object.__setattr__(self, "_inputs", None)
        object.__setattr__(self, "_variables", None)
        object.__setattr__(self, "_steps", 0)
        object.__setattr__(self, "_calls", 0)
        object.__setattr__(self, "_ops", [])

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def add_optimizer(self, optimizer, lr_sch=None):
        if lr_sch is not None:
            raise ValueError("nn.Graph: learning-rate schedulers are not supported yet (the plan's lr is fixed)")
        self._optimizers.append(optimizer)

    def build(self, *args):
        raise NotImplementedError(f"{type(self).__name__} must define build()")

    @property
    def plan(self):
        """The compiled plan (after the first call): hash, ranks, pieces, planned memory, SBP decisions.
        Under olrun each process compiles only its own rank (plan.per_rank, plan.rank; num_tasks and
        planned_bytes are that rank's; plan.ranks and the bindings still cover the whole job);
        graph.whole_plan() compiles every rank's plan on request."""
        if self._runner is None:
            raise RuntimeError("the graph is compiled by its first call")
        return self._runner.plan

    def whole_plan(self):
        """Every rank's plan of the traced job (compiled now, not run): what one process holds
        without olrun. Under olrun the graph runs a per-rank plan; this is for olplan and for
        summaries of every rank (each process compiles the whole job: costs time at large scale)."""
        if self._runner is None:
            raise RuntimeError("the graph is compiled by its first call")
        if not self._runner.plan.per_rank:
            return self._runner.plan
        return STATE.engine.compile(self._job_text, world_size=STATE.engine.world_size, whole_plan=True)

    def save_plan(self, path, whole=False):
        """Writes the compiled plan for olplan: `tools/olplan summary --plan PATH` (memory, sbp,
        boxing, simulate, html, diff: tools/plan/README.md). Under olrun that is this process's
        rank's plan (`olplan verify` checks what a rank can alone); whole=True writes the whole
        plan (graph.whole_plan())."""
        plan = self.whole_plan() if whole else self.plan
        with open(path, "wb") as f:
            f.write(plan.serialize())
        return path

    @property
    def job_text(self):
        """The traced logical job, in the compiler's text format."""
        return self._job_text

    # --- first call: trace + compile ----------------------------------------------------
    def _compile(self, args):
        pieces = max(1, self.config.micro_batches)
        for m_name, m in self._modules.items():
            for path, sub in m.named_modules(m_name):
                object.__setattr__(sub, "_trace_path", path)
            for pname, p in m.named_parameters(m_name):
                p._trace_name = pname
        tracer = _graph_trace.Tracer(recompute_all=self.config.recompute)
        lazy_args = []
        with _graph_trace.tracing(tracer):
            for i, a in enumerate(args):
                if not isinstance(a, Tensor):
                    raise ValueError(f"nn.Graph call: argument {i} must be an ol tensor, got {type(a).__name__}")
                shape = list(a._shape)
                if pieces > 1:
                    if not shape or shape[0] % pieces:
                        raise ValueError(f"nn.Graph: argument {i} of shape {shape} cannot be split into {pieces} "
                                         "micro-batches along axis 0")
                    shape[0] //= pieces
                lazy_args.append(tracer.declare_input(f"input_{i}", a, shape))
            outputs = self.build(*lazy_args)
        single = not isinstance(outputs, (tuple, list))
        outs = [outputs] if single else list(outputs)
        for o in outs:
            if not isinstance(o, Tensor) or o._lazy is None:
                raise ValueError("nn.Graph.build() must return tensors computed from its inputs / modules")
        lines = [self.config.text(type(self).__name__)] + tracer.lines
        out_names = []
        for o in outs:
            if o._lazy not in out_names:
                out_names.append(o._lazy)
        lines.append(f"output({', '.join(_job.quote(n) for n in out_names)})")
        trainable = [(n, p) for n, p in tracer.variables if p.requires_grad]
        if tracer.loss is not None:
            if not self._optimizers:
                raise ValueError("nn.Graph: build() called loss.backward() but the graph has no optimizer "
                                 "(self.add_optimizer(...))")
            opt = self._optimizers[0]
            covered = {id(p) for o in self._optimizers for p in o.params}
            lines = [ln if not _is_uncovered_variable(ln, trainable, covered) else ln.replace(") placement", ", frozen=true) placement", 1)
                     for ln in lines]
            lines.append(f"train({_job.quote(tracer.loss)}, optimizer={opt.job_text()})")
        text = "\n".join(lines) + "\n"
        world = STATE.engine.world_size if STATE.engine.distributed else 0
        plan = STATE.engine.compile(text, world_size=world)
        runner = STATE.engine.new_runner(plan)
        object.__setattr__(self, "_job_text", text)
        object.__setattr__(self, "_runner", runner)
        object.__setattr__(self, "_outputs", (outs, single, out_names))
        object.__setattr__(self, "_inputs", [n for n, _ in tracer.inputs])
        object.__setattr__(self, "_variables", tracer.variables + tracer.constants)
        object.__setattr__(self, "_ops", tracer.ops)
        for name, p in self._variables:
            self._push(name, p)
            p._graph_version = p._version if hasattr(p, "_version") else 0
            if hasattr(p, "_version"):
                p._sync = self._pull
                p._graph_name = name
                p._synced_step = 0

    # --- variables between Python and the runtime ---------------------------------------
    def _needs_logical(self, name, t, pieces=1):
        """Whether some rank's binding of `name` is not a shard `t` holds as is. The same answer on
        every process (it reads every rank's binding), so the gather it triggers is collective."""
        runner = self._runner
        if t._placement is None:
            return False
        for r in runner.plan.ranks:
            b = runner.binding(name, r)
            if b is None:
                continue
            if pieces > 1 or r not in t._placement.flat_ranks or sbp_mod.from_text(b["nd_sbp"]) != t._sbp or \
                    b["hierarchy"] != t._placement.hierarchy:
                return True
        return False

    def _push(self, name, t):
        runner = self._runner
        logical = _logical(t) if self._needs_logical(name, t) else None
        for r in runner.local_ranks:
            b = runner.binding(name, r)
            if b is None:
                continue
            if t._placement is None:
                runner.write_variable_shard(name, r, _shard_of(_c(t._value), b))
            elif logical is None:
                runner.write_variable_shard(name, r, t._shards[r])
            else:
                runner.write_variable_shard(name, r, _shard_of(logical, b))

    def _pull(self, p):
        if getattr(p, "_synced_step", 0) == self._steps or self._runner is None:
            return
        runner = self._runner
        name = p._graph_name
        shards, sbp, hierarchy = {}, None, None
        for r in runner.local_ranks:
            b = runner.binding(name, r)
            if b is not None:
                shards[r] = runner.read_variable_shard(name, r)
                sbp = sbp_mod.from_text(b["nd_sbp"])
        p._synced_step = self._steps
        if p._placement is None:
            p._value = shards[0]
            return
        if sbp is None:
            sbp = p._sbp
        p._shards, p._sbp = shards, sbp
        p._graph_version = p._version

    # --- calls --------------------------------------------------------------------------
    def __call__(self, *args):
        if self._runner is None:
            self._compile(args)
        else:
            for name, p in self._variables:  # parameters changed in Python since the last step
                if getattr(p, "_version", 0) != getattr(p, "_graph_version", 0):
                    self._push(name, p)
                    p._graph_version = p._version
                    p._synced_step = self._steps
        runner = self._runner
        pieces = runner.pieces_per_step // max(1, self.config.gradient_accumulation_steps) \
            if self.config.gradient_accumulation_steps > 1 else runner.pieces_per_step
        if len(args) != len(self._inputs):
            raise ValueError(f"nn.Graph: called with {len(args)} arguments, traced with {len(self._inputs)}")
        for name, a in zip(self._inputs, args):
            self._feed(name, a, pieces)
        self._calls += 1
        acc = max(1, self.config.gradient_accumulation_steps)
        if self._calls % acc:
            return None
        runner.run_step()
        self._steps += 1
        return self._fetch()

    def _feed(self, name, a, pieces):
        runner = self._runner
        logical = None
        if a._placement is None:
            logical = _c(a._value)
        elif self._needs_logical(name, a, pieces):
            logical = _logical(a)
        for r in runner.local_ranks:
            b = runner.binding(name, r)
            if b is None:
                continue
            if logical is None:
                runner.feed_shard(name, r, a._shards[r])
                continue
            if pieces == 1:
                runner.feed_shard(name, r, _shard_of(logical, b))
                continue
            rows = logical.shape[0] // pieces
            for k in range(pieces):
                runner.feed_shard(name, r, _shard_of(_c(logical[k * rows:(k + 1) * rows]), b))

    def _fetch(self):
        runner = self._runner
        outs, single, names = self._outputs
        values = {}
        for name in names:
            info = next((runner.binding(name, r) for r in runner.plan.ranks if runner.binding(name, r) is not None), None)
            firings = {r: runner.fetch_shards(name, r) for r in runner.local_ranks if runner.holds(name, r)}
            proto = next(o for o in outs if o._lazy == name)
            count = len(next(iter(firings.values()))) if firings else runner.pieces_per_step
            if not info["logical_shape"] and count > 1:  # a scalar per micro-batch (the loss): their mean
                firings = {r: [np.asarray(np.mean(np.stack(f), axis=0), dtype=f[0].dtype)] for r, f in firings.items()}
                count = 1
            pieces = []
            for k in range(count):
                shards = {r: f[k] for r, f in firings.items()}
                if proto._placement is None:
                    pieces.append(Tensor._local(shards[0]))
                else:
                    pieces.append(Tensor._global(proto._placement, sbp_mod.from_text(info["nd_sbp"]),
                                                 info["logical_shape"], proto._dtype, shards))
            if len(pieces) == 1:
                values[name] = pieces[0]
            else:  # one value per micro-batch: the whole batch again, along axis 0
                from ..functional import cat
                from ..tensor import no_grad
                with no_grad():
                    values[name] = cat(pieces, dim=0)
        result = [values[o._lazy] for o in outs]
        return result[0] if single else tuple(result)

    # --- inspection ---------------------------------------------------------------------
    def __repr__(self):
        return self.describe(all_ops=False)

    def describe(self, all_ops=True):
        """Each op with its SBP signature and placement (all_ops=False: forward ops only)."""
        head = f"{type(self).__name__}("
        if self._runner is None:
            mods = "\n".join(f"  ({n}): {type(m).__name__}" for n, m in self._modules.items())
            return head + "\n" + mods + "\n  (not compiled yet: the first call traces and compiles build())\n)"
        plan = self._runner.plan
        decisions = {}
        for line in plan.sbp_decisions().splitlines():
            op_name, rest = line.split(": ", 1)
            decisions[op_name] = rest
        placements = {}
        for line in self._job_text.splitlines():
            if " = " in line and "placement=" in line:
                lhs = line.split(" = ", 1)[0].split(",")[0].strip().strip('"')
                placements[lhs] = line.split("placement=", 1)[1].split(" ")[0]
        planned = max(plan.planned_bytes.values(), default=0) / 2**20
        if plan.per_rank:  # under olrun: this process compiled its own rank only
            rows = [f"  plan of rank {plan.rank} (compiled per rank, job {plan.agreement['digest']}): "
                    f"{len(plan.ranks)} ranks, {plan.num_tasks} tasks on this rank, {plan.pieces_per_step} pieces "
                    f"per step, planned memory of this rank {planned:.2f} MiB"]
        else:
            rows = [f"  plan {plan.hash}: {len(plan.ranks)} ranks, {plan.num_tasks} tasks, "
                    f"{plan.pieces_per_step} pieces per step, planned memory per rank {planned:.2f} MiB"]
        hidden = 0
        for line in plan.sbp_decisions().splitlines():
            op_name = line.split(": ", 1)[0]
            if not all_ops and "/" in op_name:
                hidden += 1
                continue
            rows.append(f"  {line}" + (f"  @{placements[op_name]}" if op_name in placements else ""))
        if hidden:
            rows.append(f"  (+{hidden} backward and optimizer ops: graph.describe(all_ops=True))")
        return head + "\n" + "\n".join(rows) + "\n)"

    def save(self, directory, step=None):
        """A sharded checkpoint of every variable (parameters and optimizer state) in oltrain's
        format (docs/checkpoint_format.md): loads under any layout, in Python or oltrain."""
        if self._runner is None:
            raise RuntimeError("nn.Graph.save: the graph is compiled by its first call")
        import os
        step = self._steps if step is None else int(step)
        path = os.path.join(directory, f"step_{step:08d}")
        self._runner.save(path, step)
        return path

    def load(self, path):
        """Loads a checkpoint saved under any layout (a step_N directory, or a root: its newest)."""
        if self._runner is None:
            raise RuntimeError("nn.Graph.load: call the graph once first (it compiles), then load")
        import os
        if not os.path.exists(os.path.join(path, "COMPLETE")):
            steps = sorted(d for d in os.listdir(path) if d.startswith("step_")) if os.path.isdir(path) else []
            steps = [d for d in steps if os.path.exists(os.path.join(path, d, "COMPLETE"))]
            if not steps:
                raise ValueError(f"nn.Graph.load: no complete checkpoint under {path}")
            path = os.path.join(path, steps[-1])
        step = self._runner.load(path)
        object.__setattr__(self, "_steps", self._steps + 1)  # parameters re-read on next access
        return step


def _is_uncovered_variable(line, trainable, covered):
    for name, p in trainable:
        if id(p) not in covered and line.startswith(f"{_job.quote(name)} = variable("):
            return True
    return False


def _logical(t):
    return _c(t._value) if t._placement is None else \
        (t._logical if getattr(t, "_logical", None) is not None else t.numpy())


def _shard_of(logical, binding):
    if all(s.kind == "B" for s in sbp_mod.from_text(binding["nd_sbp"])):
        return _c(logical)
    h = binding["hierarchy"]
    idx = int(np.ravel_multi_index(binding["mesh_coords"], h)) if h else 0
    return _C.shard(_c(logical), binding["nd_sbp"], h)[idx]
