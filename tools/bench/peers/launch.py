"""Starts N local ranks of a Python script with torch's env:// variables (a minimal torchrun:
Debian's python3-torch 1.13 torchrun fails under Python 3.11 in elastic's to_map()).

  /usr/bin/python3 tools/bench/peers/launch.py [--nproc 2] [--port 29511] SCRIPT [ARGS...]

Every rank gets MASTER_ADDR=127.0.0.1, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK and
GLOO_SOCKET_IFNAME=lo; OMP_NUM_THREADS and OPENBLAS_NUM_THREADS default to 1. Exits with the
first non-zero exit status of the ranks (0 when all succeed); if one rank fails the others are
stopped rather than left waiting for it.
"""
import os
import subprocess
import sys
import time


def main():
    args = sys.argv[1:]
    nproc, port = 2, 29511
    while args and args[0] in ("--nproc", "--port"):
        if len(args) < 2:
            sys.exit("launch.py: %s needs a value" % args[0])
        if args[0] == "--nproc":
            nproc = int(args[1])
        else:
            port = int(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    ranks = []
    for rank in range(nproc):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(nproc),
                   RANK=str(rank), LOCAL_RANK=str(rank), GLOO_SOCKET_IFNAME="lo")
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        ranks.append(subprocess.Popen([sys.executable] + args, env=env))
    status = 0
    while ranks:
        for p in list(ranks):
            rc = p.poll()
            if rc is None:
                continue
            ranks.remove(p)
            if rc != 0 and status == 0:
                status = rc
                for other in ranks:
                    other.terminate()
        time.sleep(0.05)
    sys.exit(status)


if __name__ == "__main__":
    main()
