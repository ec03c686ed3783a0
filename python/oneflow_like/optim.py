"""ol.optim: SGD, Adam, AdamW. Inside nn.Graph the optimizer becomes the job's optimizer (the
compiler adds the update ops and their state, ZeRO-1 sharding included); eagerly, step() runs the
registry's update ops (sgd_update, adam_update) on each parameter and its .grad."""
import numpy as np

from . import _job
from .tensor import no_grad, op, run_op


class Optimizer:
    def __init__(self, params, defaults):
        params = list(params)
        if params and isinstance(params[0], dict):
            if len(params) > 1:
                raise ValueError("parameter groups with different options are not supported yet: pass one group")
            defaults = {**defaults, **{k: v for k, v in params[0].items() if k != "params"}}
            params = list(params[0]["params"])
        if not params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        self.params = params
        self.defaults = defaults
        self.state = {}

    @property
    def param_groups(self):
        return [{"params": self.params, **self.defaults}]

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None

    def _update(self, p, new):
        p._assign(new)


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0.0, weight_decay=0.0):
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    def job_text(self):
        d = self.defaults
        return f"sgd(lr={_job.value_text(float(d['lr']))}, momentum={_job.value_text(float(d['momentum']))}, " \
               f"weight_decay={_job.value_text(float(d['weight_decay']))})"

    @no_grad()
    def step(self):
        d = self.defaults
        for p in self.params:
            if p.grad is None:
                continue
            if d["momentum"] == 0.0:
                new = op("sgd_plain_update", p.detach_value(), p.grad, lr=float(d["lr"]),
                         weight_decay=float(d["weight_decay"]))
            else:
                from .tensor import zeros_like
                buf = self.state.get(id(p))
                if buf is None:
                    buf = zeros_like(p)
                new, buf = run_op("sgd_update", [p.detach_value(), p.grad, buf],
                                  {"lr": float(d["lr"]), "momentum": float(d["momentum"]),
                                   "weight_decay": float(d["weight_decay"])}, 2)
                self.state[id(p)] = buf
            self._update(p, new)


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})

    def job_text(self):
        d = self.defaults
        kind = "adamw" if self._decoupled else "adam"
        v = _job.value_text
        return (f"{kind}(lr={v(float(d['lr']))}, weight_decay={v(float(d['weight_decay']))}, "
                f"beta1={v(float(d['betas'][0]))}, beta2={v(float(d['betas'][1]))}, epsilon={v(float(d['eps']))})")

    @no_grad()
    def step(self):
        from .creation import tensor
        from .tensor import zeros_like
        d = self.defaults
        for p in self.params:
            if p.grad is None:
                continue
            m, v, t = self.state.get(id(p), (zeros_like(p), zeros_like(p), 0))
            t += 1
            kw = {}
            if p._placement is not None:
                kw = {"placement": p._placement, "sbp": [__import__("oneflow_like").sbp.broadcast] * p._placement.ndim}
            step = tensor(np.array(t, dtype=np.int64), **kw)
            new, m, v = run_op("adam_update", [p.detach_value(), p.grad, m, v, step],
                               {"lr": float(d["lr"]), "beta1": float(d["betas"][0]), "beta2": float(d["betas"][1]),
                                "epsilon": float(d["eps"]), "weight_decay": float(d["weight_decay"]),
                                "decoupled_weight_decay": self._decoupled}, 3)
            self.state[id(p)] = (m, v, t)
            self._update(p, new)


class AdamW(Adam):
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
