"""ol.sbp: how a global tensor is laid out over its placement: split(dim), broadcast, partial_sum."""


class _Sbp:
    __slots__ = ("kind", "axis")

    def __init__(self, kind, axis=0):
        self.kind = kind
        self.axis = axis

    @property
    def text(self):
        return {"S": f"S({self.axis})", "B": "B", "P": "P"}[self.kind]

    def __eq__(self, other):
        return isinstance(other, _Sbp) and (self.kind, self.axis) == (other.kind, other.axis)

    def __hash__(self):
        return hash((self.kind, self.axis))

    def __repr__(self):
        if self.kind == "S":
            return f"oneflow_like.sbp.split(dim={self.axis})"
        return "oneflow_like.sbp.broadcast" if self.kind == "B" else "oneflow_like.sbp.partial_sum"


def split(dim):
    if not isinstance(dim, int) or dim < 0:
        raise ValueError(f"sbp.split needs a non-negative int axis, got {dim!r}")
    return _Sbp("S", dim)


broadcast = _Sbp("B")
partial_sum = _Sbp("P")


def normalize(sbp, placement):
    """One SBP or a tuple (one per mesh axis) -> a tuple of _Sbp with one entry per axis."""
    items = tuple(sbp) if isinstance(sbp, (tuple, list)) else (sbp,)
    for s in items:
        if not isinstance(s, _Sbp):
            raise ValueError(f"not an SBP: {s!r} (use ol.sbp.split(dim), ol.sbp.broadcast, ol.sbp.partial_sum)")
    if len(items) != placement.ndim:
        raise ValueError(f"sbp {to_text(items)} has {len(items)} entries but placement {placement.text} has "
                         f"{placement.ndim} mesh axes (give one SBP per axis)")
    return items


def to_text(items):
    return "[" + ", ".join(s.text for s in items) + "]"


def from_text(text):
    """'(S(0), B)' -> tuple of _Sbp."""
    import re
    out = []
    for m in re.finditer(r"S\((\d+)\)|(B)|(P)", text):
        if m.group(1) is not None:
            out.append(split(int(m.group(1))))
        elif m.group(2):
            out.append(broadcast)
        else:
            out.append(partial_sum)
    return tuple(out)
