#!/usr/bin/python3
"""olrun: starts the local processes (ranks) of a oneflow_like job on this node.

Contract:
  olrun [--nnodes N] [--node-rank I] --nproc-per-node P [--master-addr A] [--master-port Q]
        [--job-token T] [--log-dir D] [--timeout-s S] [--report-s R] [--grace-s G]
        [--max-restarts K] [--no-slurm] (script.py [args...] | --config FILE [trainer args...])
  starts P processes, global ranks I*P .. I*P+P-1 of a world of N*P, each with the rank/world
  variables listed in `olrun --help`. Every line a rank prints is streamed with a "[rank R] "
  prefix (its stdout to our stdout, its stderr to our stderr). The job ends when every rank has
  ended: exit 0 if all exited 0; otherwise the first rank to fail (non-zero exit or a signal)
  stops the others (after --report-s for them to exit with their own report: SIGTERM to each
  rank's process group, SIGKILL after the grace period) and
  olrun exits with that rank's code (128+signal for a signal) after a summary naming it.
Restarts (--max-restarts K > 0): after a failed round olrun starts every rank of its node again
  as round r+1 (OL_RESTART_ROUND; the trainer then resumes from the newest complete checkpoint),
  logging the restart count and the failed rank with its cause; after K restarts the job fails
  for good. A round in which a rank exits 2 (bad usage) or 3 (the trainer's preflight failure)
  is not restarted: the same would happen again.
  Multi-node: each node's olrun restarts its own ranks when they fail (a failure anywhere fails
  every rank through the control plane), and the ranks' control server refuses a rank of
  another round (comm/control_client.h), so a stale rank of the previous round cannot join.
Slurm: under srun (SLURM_JOB_ID and SLURM_STEP_ID set) the node count, node rank, master
  address and port and the job token default to values derived from Slurm's environment
  (slurm.py); explicit flags win; --no-slurm ignores Slurm.

Example (4 ranks on this machine, the built-in trainer):
  tools/olrun --nproc-per-node 4 --config configs/gpt_4rank.cfg --steps=10
  -> "[rank 0] step 0 loss ..." ... "olrun: all 4 ranks of node 0 exited 0 (...)"

Errors: bad flags exit 2 with a message naming the flag (argparse); a missing script, config
  or trainer binary exits 2 before anything starts; --timeout-s expiry exits 124; SIGINT /
  SIGTERM / SIGHUP to olrun are forwarded to every rank (SIGKILL after the grace period, or at
  once on a second signal) and olrun exits 128+signal.
No orphans: each rank runs in its own session / process group (so Ctrl-C at a terminal reaches
  only olrun, which forwards it) and gets PR_SET_PDEATHSIG=SIGKILL, so it dies if olrun is
  killed with SIGKILL. Process groups are killed when the job ends. Known limit: if olrun is
  SIGKILLed, grandchildren of a rank survive unless the rank cleans them up.
Threading: the main thread spawns the ranks and supervises them; one reader thread per rank
  stream forwards its lines under one output lock, so lines of different ranks never mix; one
  waiter thread per rank queues its exit, so "first failure" is the rank that ended first.
"""

import argparse
import ctypes
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time


def _import_sibling(name):
    """Imports tools/launcher/<name>.py from the checkout, a Bazel runfiles tree or bazel run."""
    here = os.path.dirname(os.path.abspath(__file__))
    for directory in (here, os.path.join(here, "launcher"), os.path.dirname(os.path.realpath(__file__))):
        if os.path.isfile(os.path.join(directory, name + ".py")):
            sys.path.insert(0, directory)
            break
    return __import__(name)


slurm = _import_sibling("slurm")

PYTHON = "/usr/bin/python3"
BUILD_TRAINER_HINT = "bash tools/bazel.sh build -c opt //tools/train:oltrain"
MAX_CHUNK_BYTES = 1 << 16     # longer lines are forwarded in pieces, each with its own prefix
MAX_PROCESSES_PER_NODE = 1024  # a typo must not fork thousands of processes
POLL_S = 0.05                 # how often the supervisor looks at the ranks
EXIT_TIMEOUT = 124
EXIT_USAGE = 2                # a rank exiting 2 was given bad flags or environment: no restart
EXIT_PREFLIGHT = 3            # a rank exiting 3 failed its preflight checks: no restart

# Options that take a value; --config ends olrun's options (the rest goes to the trainer).
VALUE_OPTIONS = ("--nnodes", "--node-rank", "--nproc-per-node", "--master-addr", "--master-port",
                 "--job-token", "--log-dir", "--timeout-s", "--report-s", "--grace-s", "--max-restarts")

EPILOG = """\
environment set for every rank:
  RANK              global rank = NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK
  WORLD_SIZE        nnodes * nproc-per-node
  LOCAL_RANK        0 .. nproc-per-node-1 on this node
  LOCAL_WORLD_SIZE  nproc-per-node
  NODE_RANK         --node-rank
  MASTER_ADDR       --master-addr
  MASTER_PORT       --master-port
  OL_JOB_TOKEN      --job-token (or a random one for a single-node job)
  OL_RESTART_ROUND  0 for the first run, r after the r-th restart (--max-restarts)
  OL_MAX_RESTARTS   --max-restarts
  PYTHONUNBUFFERED  1 unless already set (so Python ranks' lines stream promptly)
  OMP_NUM_THREADS, OPENBLAS_NUM_THREADS
                    cores / nproc-per-node (at least 1) unless already set, so the ranks
                    of a node share its cores instead of oversubscribing them
  (the rest of olrun's environment is passed on; a rank's stdin is /dev/null)

environment read by olrun:
  OL_JOB_TOKEN      default for --job-token (keeps the token off the command line / ps)
  OLRUN_TRAINER     the trainer binary for --config (default: bazel-bin/tools/train/oltrain
                    under the repository root; build it with
                    `bash tools/bazel.sh build -c opt //tools/train:oltrain`)
  SLURM_*           under srun (SLURM_JOB_ID and SLURM_STEP_ID set), unless --no-slurm:
                    --nnodes = SLURM_STEP_NUM_NODES or SLURM_NNODES, --node-rank = SLURM_NODEID,
                    --master-addr = the first host of SLURM_STEP_NODELIST or SLURM_JOB_NODELIST
                    (bracket syntax, e.g. node[01-03,07]), resolved on this node;
                    --master-port = 20000 + a hash of SLURM_JOB_ID and SLURM_STEP_ID;
                    --job-token = derived from SLURM_JOB_ID (keeps jobs apart; not a secret:
                    set OL_JOB_TOKEN for one); OL_BIND_ADDR = this node's address towards the
                    master unless set. Explicit flags win. One olrun per node:
                    srun --ntasks-per-node=1 olrun --nproc-per-node 8 ...

restarts (--max-restarts K):
  when a rank fails, olrun stops the round as without restarts (the summary names the first
  failed rank), then starts every rank of this node again with OL_RESTART_ROUND = r + 1; the
  built-in trainer resumes from the newest complete checkpoint in its --checkpoint_dir. Each
  restart is logged ("olrun: restart 1 of K ...", naming the failed rank and its cause). After
  K restarts a failing round ends the job. A round in which a rank exits 2 (bad usage) or 3
  (the trainer's preflight failure: different binary or plan, too little memory, unshared
  checkpoint directory) is not restarted. --timeout-s covers all rounds together.

exit status: 0 if every rank exited 0 (in the last round); else the first failing rank's exit
code of the last round (128+N if it was killed by signal N); 124 on --timeout-s; 128+N if olrun
got signal N; 2 for bad usage.

examples:
  # 2 ranks of a Python script on this machine (port picked automatically)
  tools/olrun --nproc-per-node 2 my_script.py --lr 0.1
  # the built-in trainer from a config, extra flags go to the trainer
  tools/olrun --nproc-per-node 4 --master-addr 127.0.0.1 --master-port 29500 \\
      --config configs/gpt_4rank.cfg --steps=20
  # 2 nodes x 2 ranks: run on each node with its --node-rank and the same token
  OL_JOB_TOKEN=s3cret tools/olrun --nnodes 2 --node-rank 0 --nproc-per-node 2 \\
      --master-addr 10.0.0.1 --master-port 29500 --log-dir logs train.py
  # survive up to 3 rank failures, resuming from the newest checkpoint each time
  tools/olrun --nproc-per-node 4 --max-restarts 3 --config configs/gpt_4rank.cfg \\
      --checkpoint_dir=/tmp/ckpt --checkpoint_every=50
  # under Slurm (sbatch script): one olrun per node, everything else from Slurm
  srun --ntasks-per-node=1 tools/olrun --nproc-per-node 8 --config configs/gpt_4rank.cfg
"""


class UsageError(Exception):
    """Bad command line: reported like argparse does, exit status 2."""


def repo_root():
    """The directory above tools/ (this file is tools/launcher/olrun.py, or tools/olrun in runfiles)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.basename(here) == "launcher":
        here = os.path.dirname(here)
    return os.path.dirname(here)


def make_parser():
    parser = argparse.ArgumentParser(
        prog="olrun", allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="olrun [options] (script.py [script args...] | --config FILE [trainer args...])",
        description="Start the ranks of a oneflow_like job on this node, stream their output with a "
                    "[rank R] prefix, and stop the whole job if one rank fails.",
        epilog=EPILOG)
    parser.add_argument("--nnodes", type=int, default=None, metavar="N",
                        help="number of nodes (default 1; under srun: Slurm's node count)")
    parser.add_argument("--node-rank", type=int, default=None, metavar="I",
                        help="this node's index, 0 <= I < nnodes (default 0; under srun: SLURM_NODEID)")
    parser.add_argument("--nproc-per-node", type=int, required=True, metavar="P",
                        help="ranks (processes) to start on this node")
    parser.add_argument("--master-addr", default=None, metavar="A",
                        help="address of the rank-0 node (default 127.0.0.1 for a single-node job; "
                             "required when nnodes > 1)")
    parser.add_argument("--master-port", type=int, default=None, metavar="Q",
                        help="port of the job's control server on the master, 1..65535 (default for a "
                             "single-node job: a free ephemeral port; required when nnodes > 1)")
    parser.add_argument("--job-token", default=os.environ.get("OL_JOB_TOKEN"), metavar="T",
                        help="shared secret of the job (default: $OL_JOB_TOKEN, else a random token for a "
                             "single-node job; every node must get the same one, so it is required when "
                             "nnodes > 1)")
    parser.add_argument("--log-dir", default=None, metavar="D",
                        help="also write each rank's raw output (stdout and stderr) to D/rank_R.log")
    parser.add_argument("--timeout-s", type=float, default=None, metavar="S",
                        help="wall-clock limit of the whole job in seconds; on expiry every rank is "
                             "stopped and olrun exits 124")
    parser.add_argument("--report-s", type=float, default=3.0, metavar="R",
                        help="after a rank fails, seconds the others get to notice it and exit with "
                             "their own report before olrun stops them (default 3)")
    parser.add_argument("--grace-s", type=float, default=5.0, metavar="G",
                        help="seconds between SIGTERM and SIGKILL when stopping ranks (default 5)")
    parser.add_argument("--max-restarts", type=int, default=0, metavar="K",
                        help="after a failed round, start every rank of this node again (the trainer "
                             "resumes from the newest complete checkpoint), at most K times (default 0: "
                             "the first failure ends the job)")
    parser.add_argument("--no-slurm", action="store_true",
                        help="ignore Slurm's environment (SLURM_*) even under srun")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="run the built-in trainer ($OLRUN_TRAINER or bazel-bin/tools/train/oltrain) "
                             "as `oltrain --config=FILE [trainer args...]`; everything after FILE goes "
                             "to the trainer")
    return parser


def split_command_line(argv):
    """Splits argv into (olrun options, script or None, config or None, rest)."""
    options, index = [], 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            index += 1
            break
        if token == "--config" or token.startswith("--config="):
            if "=" in token:
                return options, None, token.split("=", 1)[1], argv[index + 1:]
            if index + 1 >= len(argv):
                options.append(token)  # argparse reports the missing value
                return options, None, None, []
            return options, None, argv[index + 1], argv[index + 2:]
        if not token.startswith("-") or token == "-":
            break
        options.append(token)
        if token in VALUE_OPTIONS and index + 1 < len(argv):
            options.append(argv[index + 1])
            index += 1
        index += 1
    if index >= len(argv):
        return options, None, None, []
    return options, argv[index], None, argv[index + 1:]


def free_port(address):
    import socket
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def resolve_trainer(root):
    explicit = os.environ.get("OLRUN_TRAINER")
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise UsageError(f"OLRUN_TRAINER={explicit} is not an executable file")
        return explicit
    # bazel-bin in a checkout; tools/train/oltrain in a Bazel runfiles tree.
    for candidate in (os.path.join(root, "bazel-bin/tools/train/oltrain"), os.path.join(root, "tools/train/oltrain")):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise UsageError(f"the trainer binary is not built (looked for {root}/bazel-bin/tools/train/oltrain): "
                     f"build it with `{BUILD_TRAINER_HINT}` or set OLRUN_TRAINER")


def parse_arguments(argv, root):
    """Returns (args, command): validated options and the argv of every rank."""
    parser = make_parser()
    options, script, config, rest = split_command_line(argv)
    args = parser.parse_args(options)

    def fail(message):
        parser.error(message)  # prints usage and the message, exits 2

    if script is None and config is None:
        fail("nothing to run: give a script (olrun [options] script.py [args...]) or --config FILE")
    args.slurm = None
    if not args.no_slurm:
        try:
            args.slurm = slurm.from_environment(os.environ)
        except slurm.SlurmError as error:
            fail(f"Slurm environment: {error} (--no-slurm ignores Slurm)")
    if args.slurm is not None:
        slurm.fill_arguments(args, fail)
    args.nnodes = 1 if args.nnodes is None else args.nnodes
    args.node_rank = 0 if args.node_rank is None else args.node_rank
    if args.max_restarts < 0:
        fail(f"--max-restarts {args.max_restarts}: must be >= 0")
    if args.nnodes < 1:
        fail(f"--nnodes {args.nnodes}: must be >= 1")
    if not 0 <= args.node_rank < args.nnodes:
        fail(f"--node-rank {args.node_rank}: must be in [0, {args.nnodes - 1}] (--nnodes {args.nnodes})")
    if not 1 <= args.nproc_per_node <= MAX_PROCESSES_PER_NODE:
        fail(f"--nproc-per-node {args.nproc_per_node}: must be in [1, {MAX_PROCESSES_PER_NODE}] (one process per rank)")
    if args.nnodes > 1 and (args.master_addr is None or args.master_port is None):
        fail("--master-addr and --master-port are required when --nnodes > 1 (every node must reach rank 0)")
    if args.master_addr is None:
        args.master_addr = "127.0.0.1"
    if not args.master_addr.strip() or any(c.isspace() for c in args.master_addr):
        fail(f"--master-addr {args.master_addr!r}: must be a non-empty host name or address")
    if args.master_port is not None and not 1 <= args.master_port <= 65535:
        fail(f"--master-port {args.master_port}: must be in 1..65535")
    if args.job_token is None:
        if args.nnodes > 1:
            fail("--job-token (or $OL_JOB_TOKEN) is required when --nnodes > 1: every node must pass "
                 "the same token")
        args.job_token = secrets.token_hex(16)
    if not args.job_token or any(not c.isprintable() or c.isspace() for c in args.job_token):
        fail("--job-token: must be non-empty printable text without spaces")
    if args.timeout_s is not None and not args.timeout_s > 0:
        fail(f"--timeout-s {args.timeout_s}: must be > 0")
    if not args.grace_s >= 0:
        fail(f"--grace-s {args.grace_s}: must be >= 0")
    if not args.report_s >= 0:
        fail(f"--report-s {args.report_s}: must be >= 0")
    if script is not None:
        if script.startswith("-"):
            fail(f"unrecognized option {script}")
        if not os.path.isfile(script):
            fail(f"script {script}: no such file")
        command = [PYTHON, script] + rest
    else:
        if not os.path.isfile(config):
            fail(f"--config {config}: no such file")
        try:
            trainer = resolve_trainer(root)
        except UsageError as error:
            fail(str(error))
        command = [trainer, f"--config={config}"] + rest
    if args.master_port is None:
        try:
            args.master_port = free_port(args.master_addr)
        except OSError as error:
            fail(f"--master-port not given and no free port on {args.master_addr}: {error}")
    if args.log_dir is not None:
        try:
            os.makedirs(args.log_dir, exist_ok=True)
        except OSError as error:
            fail(f"--log-dir {args.log_dir}: cannot create it ({error.strerror})")
        if not os.access(args.log_dir, os.W_OK):
            fail(f"--log-dir {args.log_dir}: not writable")
    return args, command


def rank_environment(args, local_rank, restart_round=0):
    env = dict(os.environ)
    env.update({
        "RANK": str(args.node_rank * args.nproc_per_node + local_rank),
        "WORLD_SIZE": str(args.nnodes * args.nproc_per_node),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(args.nproc_per_node),
        "NODE_RANK": str(args.node_rank),
        "MASTER_ADDR": args.master_addr,
        "MASTER_PORT": str(args.master_port),
        "OL_JOB_TOKEN": args.job_token,
        "OL_RESTART_ROUND": str(restart_round),
        "OL_MAX_RESTARTS": str(args.max_restarts),
    })
    if args.slurm is not None and not env.get("OL_BIND_ADDR"):
        address = slurm.bind_address(args.master_addr)
        if address:
            env["OL_BIND_ADDR"] = address
    env.setdefault("PYTHONUNBUFFERED", "1")
    # Like torchrun: ranks sharing a node share its cores, so BLAS/OpenMP pools default to an
    # equal share instead of one thread per core in every rank (oversubscription).
    threads = str(max(1, (os.cpu_count() or 1) // args.nproc_per_node))
    env.setdefault("OMP_NUM_THREADS", threads)
    env.setdefault("OPENBLAS_NUM_THREADS", threads)
    return env


def die_with_parent(parent_pid):
    """preexec_fn: SIGKILL this child when olrun dies (prctl PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: the child only calls prctl
    PR_SET_PDEATHSIG = 1

    def hook():
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent_pid:  # olrun already died before prctl took effect
            os._exit(1)
    return hook


class Output:
    """Forwards ranks' lines with a prefix; one lock so that lines never interleave."""

    def __init__(self):
        self.lock = threading.Lock()

    def forward(self, stream, prefix, sink, log, remember=None):
        """Reader thread body: stream (a rank's pipe) -> sink (our stdout/stderr) and log;
        remember(line), if given, sees every non-empty line (the last one names a failure's cause)."""
        while True:
            try:
                chunk = stream.readline(MAX_CHUNK_BYTES)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            line = chunk if chunk.endswith(b"\n") else chunk + b"\n"
            if remember is not None and chunk.strip():
                remember(chunk.strip())
            with self.lock:
                try:
                    sink.write(prefix + line)
                    sink.flush()
                except (OSError, ValueError):
                    pass  # our own output is gone (e.g. a closed pipe): keep draining the rank
                if log is not None:
                    try:
                        log.write(chunk)
                        log.flush()
                    except (OSError, ValueError):
                        pass
        stream.close()

    def message(self, text):
        with self.lock:
            try:
                sys.stdout.flush()
                sys.stderr.write(text + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass


def describe(returncode):
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exit code {returncode}"


class Signals:
    """Signals olrun received, shared by every round: the first stops the job, a second escalates."""

    def __init__(self):
        self.received = None
        self.escalate = False

    def on_signal(self, signum, _frame):
        if self.received is not None:
            self.escalate = True   # a second signal: SIGKILL without waiting for the grace period
        else:
            self.received = signum


class Job:
    """One round of the ranks of this node and its supervision."""

    def __init__(self, args, command, output, signals, restart_round=0, start=None):
        self.args = args
        self.command = command
        self.output = output
        self.signals = signals
        self.restart_round = restart_round
        self.processes = []          # index = local rank
        self.threads = []
        self.logs = []
        self.last_lines = {}         # local rank -> the last line it wrote to stderr
        self.ended = queue.Queue()   # (local rank, returncode) in the order the ranks ended
        self.exits = {}              # global rank -> returncode
        self.failures = []           # global ranks that ended badly before the stop, in order seen
        self.stop_reason = None      # why olrun stopped the job (None: it did not)
        self.timed_out = False
        self.term_sent_at = None
        self.failed_at = None        # when the first failure was seen
        self.kill_sent = False
        self.start = time.monotonic() if start is None else start   # of the whole job (--timeout-s)
        self.round_start = time.monotonic()

    @property
    def signal_received(self):
        return self.signals.received

    def global_rank(self, local_rank):
        return self.args.node_rank * self.args.nproc_per_node + local_rank

    def launch(self):
        for local in range(self.args.nproc_per_node):
            if self.args.log_dir is not None:
                path = os.path.join(self.args.log_dir, f"rank_{self.global_rank(local)}.log")
                log = open(path, "wb" if self.restart_round == 0 else "ab")
                if self.restart_round > 0:
                    log.write(f"=== olrun: restart round {self.restart_round} ===\n".encode())
                self.logs.append(log)
        # Spawn every rank before any thread exists (preexec_fn is not safe with threads).
        for local in range(self.args.nproc_per_node):
            env = rank_environment(self.args, local, self.restart_round)
            process = subprocess.Popen(self.command, env=env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                       preexec_fn=die_with_parent(os.getpid()))
            self.processes.append(process)
            if self.signal_received is not None:
                break
        for local, process in enumerate(self.processes):
            prefix = f"[rank {self.global_rank(local)}] ".encode()
            log = self.logs[local] if self.logs else None
            remember = lambda line, l=local: self.last_lines.__setitem__(l, line)
            for stream, sink, keep in ((process.stdout, sys.stdout.buffer, None),
                                       (process.stderr, sys.stderr.buffer, remember)):
                thread = threading.Thread(target=self.output.forward, args=(stream, prefix, sink, log, keep),
                                          daemon=True)
                thread.start()
                self.threads.append(thread)
            # One waiter per rank: exits are queued in the order the ranks end, so the first failure
            # is the one that happened first, not the lowest rank seen by a polling loop.
            threading.Thread(target=lambda l=local, p=process: self.ended.put((l, p.wait())), daemon=True).start()

    def signal_groups(self, signum, only_running=True):
        for local, process in enumerate(self.processes):
            if only_running and self.global_rank(local) in self.exits:
                continue
            try:
                os.killpg(process.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    def begin_stop(self, reason, signum=signal.SIGTERM):
        """Sends signum (SIGTERM, or the signal olrun got) to every running rank's group."""
        if self.stop_reason is None:
            self.stop_reason = reason
            self.term_sent_at = time.monotonic()
            self.signal_groups(signum)

    def record_exits(self):
        """Takes the rank exits queued so far (waiting up to POLL_S for the first)."""
        timeout = POLL_S
        while True:
            try:
                local, returncode = self.ended.get(timeout=timeout)
            except queue.Empty:
                return
            rank = self.global_rank(local)
            self.exits[rank] = returncode
            if returncode != 0 and self.stop_reason is None:
                self.failures.append(rank)
            timeout = 0.001

    def supervise(self):
        """Watches the ranks until all have ended; returns olrun's exit status."""
        while len(self.exits) < len(self.processes):
            self.record_exits()
            if self.failures and self.stop_reason is None:
                # The others usually learn of the failure themselves (control plane) and exit with
                # a report naming it; give them --report-s for that before stopping them.
                if self.failed_at is None:
                    self.failed_at = time.monotonic()
                if time.monotonic() - self.failed_at >= self.args.report_s:
                    self.begin_stop(f"rank {self.failures[0]} failed")
            if self.signal_received is not None and self.stop_reason is None:
                self.begin_stop(f"olrun got {signal.Signals(self.signal_received).name}", self.signal_received)
            if (self.args.timeout_s is not None and self.stop_reason is None and
                    time.monotonic() - self.start > self.args.timeout_s):
                self.timed_out = True
                self.begin_stop(f"the job exceeded --timeout-s {self.args.timeout_s:g}")
                self.output.message(f"olrun: {self.stop_reason}; stopping every rank")
            if (self.term_sent_at is not None and not self.kill_sent and len(self.exits) < len(self.processes) and
                    (self.signals.escalate or time.monotonic() - self.term_sent_at >= self.args.grace_s)):
                self.kill_sent = True
                self.signal_groups(signal.SIGKILL)
        # Whatever the ranks left in their process groups goes too, so the pipes close.
        self.signal_groups(signal.SIGKILL, only_running=False)
        for thread in self.threads:
            thread.join(timeout=5)
        for log in self.logs:
            log.close()
        return self.summarize()

    def summarize(self):
        seconds = time.monotonic() - self.start
        world = self.args.nnodes * self.args.nproc_per_node
        ranks = sorted(self.exits)
        if not self.failures and self.stop_reason is None:
            after = f" (round {self.restart_round}: after {self.restart_round} restart(s))" if self.restart_round else ""
            self.output.message(f"olrun: all {len(ranks)} ranks of node {self.args.node_rank} exited 0 "
                                f"(ranks {ranks[0]}-{ranks[-1]} of world {world}) in {seconds:.1f} s{after}")
            return 0
        parts = []
        if self.failures:
            first = self.failures[0]
            failed = ", ".join(f"rank {r} ({describe(self.exits[r])})" for r in self.failures)
            parts.append(f"first failure: rank {first} ({describe(self.exits[first])}); failed: {failed}")
        else:
            parts.append(self.stop_reason)
        stopped = [r for r in ranks if r not in self.failures and self.exits[r] != 0]
        if stopped:
            parts.append("stopped by olrun: " + ", ".join(f"rank {r} ({describe(self.exits[r])})" for r in stopped))
        what = f"round {self.restart_round} of the job" if self.args.max_restarts > 0 else "job"
        self.output.message(f"olrun: {what} FAILED after {seconds:.1f} s: " + "; ".join(parts))
        if self.failures:
            code = self.exits[self.failures[0]]
            return code if code > 0 else 128 - code
        if self.signal_received is not None:
            return 128 + self.signal_received
        return EXIT_TIMEOUT

    def cause(self):
        """The first failed rank and why: its exit and the last line it wrote to stderr."""
        if not self.failures:
            return self.stop_reason or "no rank failed"
        first = self.failures[0]
        last = self.last_lines.get(first - self.global_rank(0))
        said = f"; its last line: {last.decode(errors='replace')}" if last else ""
        return f"rank {first} failed ({describe(self.exits[first])}{said})"

    def not_restartable(self):
        """Why a new round cannot help (None if it might): a signal to olrun, --timeout-s, or a rank
        that exited 2 (bad usage) or 3 (failed preflight checks): the same again would follow."""
        if self.signal_received is not None or self.timed_out or not self.failures:
            return self.stop_reason
        for rank, code in sorted(self.exits.items()):
            if code in (EXIT_USAGE, EXIT_PREFLIGHT):
                what = "bad usage" if code == EXIT_USAGE else "its preflight checks failed"
                return f"rank {rank} exited {code}: {what}; restarting cannot fix that"
        return None


def run_round(args, command, output, signals, restart_round, start):
    """Starts and supervises one round; returns (exit status, the Job)."""
    job = Job(args, command, output, signals, restart_round, start)
    try:
        job.launch()
    except OSError as error:
        output.message(f"olrun: cannot start the ranks ({' '.join(command[:2])}): {error}")
        job.signal_groups(signal.SIGKILL)
        for process in job.processes:
            process.wait()
        return 1, None
    return job.supervise(), job


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args, command = parse_arguments(argv, repo_root())
    output, signals = Output(), Signals()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signals.on_signal)
    if args.slurm is not None:
        output.message(f"olrun: Slurm job {args.slurm.job_id} step {args.slurm.step_id}: node {args.node_rank} of "
                       f"{args.nnodes}, master {args.slurm.master_host} = {args.master_addr}:{args.master_port}")
    start = time.monotonic()
    restart_round = 0
    while True:
        code, job = run_round(args, command, output, signals, restart_round, start)
        if code == 0 or job is None or args.max_restarts == 0:
            return code
        why_not = job.not_restartable()
        if why_not:
            output.message(f"olrun: not restarting ({why_not}); job FAILED")
            return code
        if restart_round >= args.max_restarts:
            output.message(f"olrun: job FAILED for good: round {restart_round} failed ({job.cause()}) and all "
                           f"{args.max_restarts} restart(s) of --max-restarts are used up")
            return code
        restart_round += 1
        output.message(f"olrun: restart {restart_round} of {args.max_restarts}: {job.cause()}; starting every rank "
                       f"of node {args.node_rank} again as round {restart_round} (the trainer resumes from the "
                       f"newest complete checkpoint)")


if __name__ == "__main__":
    sys.exit(main())
