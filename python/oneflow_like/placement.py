"""ol.placement: which ranks hold a global tensor, as a 1-D list or a 2-D mesh."""
from . import _C
from ._state import STATE


class placement:
    """placement("cpu", ranks=[0, 1, 2, 3]) or placement("cpu", ranks=[[0, 1], [2, 3]]).

    Under a launcher every rank must be < WORLD_SIZE; in one process (no launcher) every
    rank of the placement runs as threads of this process.
    """

    def __init__(self, type="cpu", ranks=None):  # noqa: A002 - OneFlow's name
        if type != "cpu":
            raise ValueError(f"placement type '{type}' is not available: this build runs on 'cpu' "
                             "(cuda placements come with the CUDA backend)")
        if ranks is None:
            ranks = list(range(STATE.engine.world_size))
        if isinstance(ranks, int):
            ranks = [ranks]
        ranks = [list(r) for r in ranks] if ranks and isinstance(ranks[0], (list, tuple)) else list(ranks)
        text = "cpu:" + _fmt(ranks)
        canonical, flat, hierarchy = _C.check_placement(text)
        if len(set(flat)) != len(flat):
            raise ValueError(f"placement {text} names a rank twice")
        world = STATE.engine.world_size
        if STATE.engine.distributed:
            bad = [r for r in flat if r >= world]
            if bad:
                raise ValueError(f"placement {text} names rank {bad[0]} but the job has WORLD_SIZE={world} "
                                 f"(ranks 0..{world - 1})")
        self.type = type
        self.ranks = ranks
        self.text = canonical
        self.flat_ranks = list(flat)
        self.hierarchy = list(hierarchy)

    @classmethod
    def all(cls, type="cpu"):  # noqa: A002
        """Every rank of the job: placement.all("cpu") (OneFlow's flow.placement.all)."""
        return cls(type, list(range(STATE.engine.world_size)))

    @property
    def ndim(self):
        return len(self.hierarchy)

    def index_of(self, rank):
        return self.flat_ranks.index(rank) if rank in self.flat_ranks else -1

    def __eq__(self, other):
        return isinstance(other, placement) and other.text == self.text

    def __hash__(self):
        return hash(self.text)

    def __repr__(self):
        return f'oneflow_like.placement(type="{self.type}", ranks={self.ranks})'


def _fmt(ranks):
    if ranks and isinstance(ranks[0], list):
        return "[" + ",".join(_fmt(r) for r in ranks) + "]"
    return "[" + ",".join(str(int(r)) for r in ranks) + "]"
