"""What olrun takes from Slurm when it runs under `srun` (one olrun per node).

Contract:
  settings = from_environment(os.environ)   # None when not under srun; SlurmError when malformed
  args.slurm = settings; fill_arguments(args, fail)   # olrun's flags left None <- settings
  settings.nnodes, settings.node_rank       # SLURM_STEP_NUM_NODES or SLURM_NNODES; SLURM_NODEID
  settings.master_host                      # the first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST
  settings.master_port                      # 20000 + a hash of job id and step id, < 40000
  settings.job_token                        # derived from SLURM_JOB_ID (+ step, uid): the same on every node
  expand_hostlist("node[01-03,07],gpu5")    # ['node01', 'node02', 'node03', 'node07', 'gpu5']

"Under srun" means SLURM_JOB_ID and SLURM_STEP_ID are set (a batch script or an salloc shell
has no step id: olrun there is not one of several per-node launches). Every node computes the
same master, port and token from the same variables, so no flag has to be passed; flags given
to olrun win over these values. The derived token only keeps jobs apart; it is not a secret
(job ids are visible to every user of the cluster): set OL_JOB_TOKEN for that.

Hostlist syntax (Slurm's): hosts separated by commas; a bracket group holds comma-separated
numbers or ranges lo-hi, zero-padded to the width of lo ("n[08-10]" -> n08 n09 n10); several
groups in one host multiply ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2). Malformed input raises
SlurmError naming the variable, the text and what is wrong.
"""

import hashlib
import socket

MAX_HOSTS = 1 << 16   # a typo such as n[1-99999999] must not allocate millions of names
PORT_BASE = 20000
PORT_SPAN = 20000


class SlurmError(ValueError):
    """Slurm's environment cannot be used: the message names the variable and the problem."""


class Settings:
    def __init__(self, nnodes, node_rank, hosts, master_port, job_token, job_id, step_id):
        self.nnodes = nnodes
        self.node_rank = node_rank
        self.hosts = hosts
        self.master_host = hosts[0]
        self.master_port = master_port
        self.job_token = job_token
        self.job_id = job_id
        self.step_id = step_id


def _split_top_level(text):
    """Splits at commas outside brackets; checks the brackets pair up and do not nest."""
    items, depth, current = [], 0, []
    for position, char in enumerate(text):
        if char == "[":
            if depth:
                raise SlurmError(f"nested '[' at position {position}")
            depth = 1
        elif char == "]":
            if not depth:
                raise SlurmError(f"']' without '[' at position {position}")
            depth = 0
        if char == "," and not depth:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise SlurmError("'[' is never closed")
    items.append("".join(current))
    return items


def _expand_group(group):
    """'01-03,07' -> ['01', '02', '03', '07']."""
    if not group:
        raise SlurmError("empty brackets []")
    numbers = []
    for part in group.split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise SlurmError(f"'{part}' in [{group}] is not a number or a range lo-hi of numbers")
        high = high if dash else low
        if int(high) < int(low):
            raise SlurmError(f"range {part} in [{group}] runs backwards")
        if len(numbers) + int(high) - int(low) + 1 > MAX_HOSTS:
            raise SlurmError(f"[{group}] has more than {MAX_HOSTS} hosts")
        numbers.extend(f"{n:0{len(low)}d}" for n in range(int(low), int(high) + 1))
    return numbers


def _expand_host(item):
    """'r[1-2]n[1-2]' -> ['r1n1', 'r1n2', 'r2n1', 'r2n2']."""
    names = [""]
    rest = item
    while rest:
        head, bracket, tail = rest.partition("[")
        names = [name + head for name in names]
        if not bracket:
            break
        group, _, rest = tail.partition("]")
        numbers = _expand_group(group)
        if len(names) * len(numbers) > MAX_HOSTS:
            raise SlurmError(f"'{item}' has more than {MAX_HOSTS} hosts")
        names = [name + number for name in names for number in numbers]
    return names


def expand_hostlist(text, variable="SLURM_JOB_NODELIST"):
    """Slurm's compressed host list -> host names in order; SlurmError naming `variable`."""
    try:
        if not text or not text.strip():
            raise SlurmError("it is empty")
        if any(c.isspace() for c in text):
            raise SlurmError("it contains white space")
        hosts = []
        for item in _split_top_level(text):
            if not item:
                raise SlurmError("a host name is empty (two commas in a row, or one at an end)")
            hosts.extend(_expand_host(item))
            if len(hosts) > MAX_HOSTS:
                raise SlurmError(f"more than {MAX_HOSTS} hosts")
        return hosts
    except SlurmError as error:
        raise SlurmError(f"{variable}='{text}': {error}") from None


def _integer(environ, name, minimum=0):
    text = environ.get(name)
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise SlurmError(f"{name}='{text}': expected an integer") from None
    if value < minimum:
        raise SlurmError(f"{name}={value}: expected an integer >= {minimum}")
    return value


def _first(environ, names):
    """(name, value) of the first of `names` that is set and non-empty, else (names[-1], None)."""
    for name in names:
        if environ.get(name):
            return name, environ[name]
    return names[-1], None


def under_srun(environ):
    return bool(environ.get("SLURM_JOB_ID")) and bool(environ.get("SLURM_STEP_ID"))


def from_environment(environ, uid=None):
    """Settings for this node, or None when not under srun. SlurmError when they are inconsistent."""
    if not under_srun(environ):
        return None
    job_id, step_id = environ["SLURM_JOB_ID"], environ["SLURM_STEP_ID"]
    nodes_name, _ = _first(environ, ("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"))
    nnodes = _integer(environ, nodes_name, minimum=1)
    node_rank = _integer(environ, "SLURM_NODEID")
    if node_rank >= nnodes:
        raise SlurmError(f"SLURM_NODEID={node_rank} is not below {nodes_name}={nnodes}")
    list_name, nodelist = _first(environ, ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"))
    if nodelist is None:
        raise SlurmError("SLURM_JOB_NODELIST is not set: cannot tell which node is the master")
    hosts = expand_hostlist(nodelist, list_name)
    if len(hosts) != nnodes:
        raise SlurmError(f"{list_name}='{nodelist}' names {len(hosts)} hosts but {nodes_name}={nnodes}")
    tasks_name, tasks = _first(environ, ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"))
    if tasks is not None and _integer(environ, tasks_name, minimum=1) != nnodes:
        raise SlurmError(f"olrun runs once per node under srun, but {tasks_name}={tasks} tasks run on {nnodes} "
                         f"node(s): use srun --ntasks-per-node=1 (olrun starts the ranks of its node itself)")
    seed = f"{job_id}.{step_id}.{environ.get('SLURM_JOB_UID', uid if uid is not None else '')}"
    digest = hashlib.sha256(b"oneflow_like olrun slurm " + seed.encode()).hexdigest()
    port = PORT_BASE + int(digest[:8], 16) % PORT_SPAN
    return Settings(nnodes, node_rank, hosts, port, f"slurm-{digest[8:40]}", job_id, step_id)


def fill_arguments(args, fail):
    """Fills olrun's flags that were not given (None) from args.slurm; explicit flags win.
    fail(message) reports a usage error (olrun: exit 2)."""
    settings = args.slurm
    if args.nnodes is None:
        args.nnodes = settings.nnodes
    if args.node_rank is None:
        args.node_rank = settings.node_rank
    if args.master_addr is None:
        try:
            args.master_addr = socket.gethostbyname(settings.master_host)
        except OSError as error:
            fail(f"Slurm: cannot resolve the master host {settings.master_host} (the first of the node list) "
                 f"on this node: {error}; give --master-addr")
    if args.master_port is None:
        args.master_port = settings.master_port
    if args.job_token is None:
        args.job_token = settings.job_token


def bind_address(master_address):
    """This node's address on the route to the master (for OL_BIND_ADDR), None for a loopback
    master or when there is no route. A UDP connect picks the route and sends no packet."""
    if master_address == "localhost" or master_address.startswith("127."):
        return None
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((master_address, 9))
            return sock.getsockname()[0]
    except OSError:
        return None
