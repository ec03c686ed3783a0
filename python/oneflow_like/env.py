"""ol.env: the process's place in the job, from the launcher's environment (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT, OL_JOB_TOKEN as olrun / torchrun set them). Without a
launcher: rank 0 of 1 process, and global tensors run all their ranks in this process."""
from ._state import STATE


def get_rank():
    return STATE.engine.rank


def get_world_size():
    return STATE.engine.world_size


def get_local_rank():
    return STATE.engine.local_rank


def is_distributed():
    """True under a launcher (each process runs one rank)."""
    return STATE.engine.distributed


def barrier():
    """Every process waits for all others (nothing to wait for in one process)."""
    STATE.engine.barrier("user")


def all_gather_object(obj):
    """Every process's picklable `obj`, in rank order (small values: the control plane carries them)."""
    import pickle
    return [pickle.loads(b) for b in STATE.engine.all_gather(pickle.dumps(obj))]


def shutdown():
    """Ends this process's part of the job (called at exit)."""
    STATE.shutdown()
