"""Two nodes for real: one `olrun` per Linux network namespace, joined by a veth pair.

Each "node" is a network namespace with its own loopback and one end of a veth pair
(10.213.0.1/24 and 10.213.0.2/24, capped at 1 Gbit/s by an htb qdisc on both ends). Node 0 runs
`olrun --nnodes 2 --node-rank 0` with MASTER_ADDR = its veth address, node 1 the same with
`--node-rank 1`; each node's ranks bind their data transport to the node's own address
(OL_BIND_ADDR). A rank of one node can reach a rank of the other only through the veth, so the
control plane and every cross-node transfer really cross a (rate-limited) link.

Checks:
  * 2 nodes x 1 process (dp=2) and 2 nodes x 2 processes (dp=2 x tp=2, 2 micro-batches) print
    the same losses as `oltrain` running the same layout in ONE process, and their final
    checkpoints (weights and AdamW state, each rank's shards) are byte-identical: the result is
    bit-identical, not just close (same plan, same arithmetic, only the transport differs);
  * the bytes really went over the link: the veth counters (and the htb class, when rate
    limited) grew by more than the job's gradient traffic on both ends;
  * a node told to bind an address it does not have (OL_BIND_ADDR) fails, naming the address,
    and aborts the job through the control plane: rank 0 stops at once naming rank 1 and the
    address (not after OL_CONNECT_TIMEOUT_MS); the same on loopback without namespaces.

Skips, with the reason printed, where namespaces cannot be made: not root, no `ip`, netns or
veth not permitted. Without `tc` / sch_htb it runs without the rate limit and says so.
The namespaces (names unique per run: pid + random) are deleted whatever happens, also on
SIGTERM (a Bazel timeout). No traffic goes anywhere but the two namespaces made here.
"""
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.getcwd()  # the runfiles root (bazel) or the repo root
OLTRAIN = os.path.join(ROOT, "tools/train/oltrain")
OLRUN = os.path.join(ROOT, "tools/olrun")
CONFIG = os.path.join(ROOT, "configs/gpt_tiny.cfg")
TINY = ["--model=gpt", "--vocab=64", "--seq_len=16", "--n_layer=2", "--n_embd=32", "--n_head=2",
        "--batch=8", "--lr=3e-3", "--watchdog_ms=30000", "--data=synthetic"]
SUBNET = "10.213.0"        # private /24; lives only inside the namespaces made here
ADDRS = (SUBNET + ".1", SUBNET + ".2")
MASTER_PORT = 29500        # fresh namespaces: nothing else can hold it
RATE = "1gbit"
HANG_GUARD_S = 90
# One BLAS thread everywhere: sgemm's rounding depends on its thread blocking, and the checks
# compare an in-process run with per-process ranks bit for bit.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"


def find_tool(name):
    # Bazel's strict action env has PATH=/bin:/usr/bin:/usr/local/bin; ip and tc live in /usr/sbin.
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/local/sbin"
    return shutil.which(name, path=path)


def sh(argv, check=True):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` exited {p.returncode}: {(p.stderr or p.stdout).strip()}")
    return p


class TwoNodes:
    """Two namespaces <tag>-0 / <tag>-1 joined by veth <dev0> / <dev1>."""

    def __init__(self, ip, tc):
        self.ip, self.tc = ip, tc
        suffix = f"{os.getpid()}-{secrets.token_hex(3)}"  # the pid alone may repeat across sandboxes
        self.ns = (f"oltwonode-{suffix}-0", f"oltwonode-{suffix}-1")
        short = secrets.token_hex(4)                      # interface names: at most 15 characters
        self.dev = (f"olv{short}a", f"olv{short}b")
        self.made = []
        self.rate_limited = False
        self.note = ""

    def create(self):
        """Returns None when ready, else why namespaces cannot be made here (a skip reason)."""
        for ns in self.ns:
            p = sh([self.ip, "netns", "add", ns], check=False)
            if p.returncode != 0:
                return f"`ip netns add` is not permitted here: {p.stderr.strip()}"
            self.made.append(ns)
        # Created directly inside the namespaces: the names never appear in the host's namespace.
        p = sh([self.ip, "link", "add", self.dev[0], "netns", self.ns[0], "type", "veth",
                "peer", "name", self.dev[1], "netns", self.ns[1]], check=False)
        if p.returncode != 0:
            return f"cannot create a veth pair: {p.stderr.strip()}"
        for ns, dev, addr in zip(self.ns, self.dev, ADDRS):
            sh([self.ip, "-n", ns, "link", "set", "lo", "up"])
            sh([self.ip, "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
            sh([self.ip, "-n", ns, "link", "set", dev, "up"])
        if self.tc is None:
            self.note = "tc not found: running WITHOUT the 1 Gbit/s rate limit"
            return None
        for ns, dev in zip(self.ns, self.dev):
            p = sh([self.tc, "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"],
                   check=False)
            if p.returncode == 0:
                p = sh([self.tc, "-n", ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb",
                        "rate", RATE], check=False)
            if p.returncode != 0:
                why = p.stderr.strip() or f"tc exited {p.returncode}"
                self.note = f"htb qdisc unavailable ({why}): running WITHOUT the 1 Gbit/s rate limit"
                for ns_, dev_ in zip(self.ns, self.dev):
                    sh([self.tc, "-n", ns_, "qdisc", "del", "dev", dev_, "root"], check=False)
                return None
        self.rate_limited = True
        return None

    def destroy(self):
        """Idempotent: kills what still runs inside our namespaces (ours), then deletes them."""
        while self.made:
            ns = self.made.pop()
            pids = sh([self.ip, "netns", "pids", ns], check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            sh([self.ip, "netns", "del", ns], check=False)  # the veth pair goes with it

    def tx_bytes(self, node):
        """(bytes sent by the veth end of `node`, bytes sent through its htb class or None)."""
        text = sh([self.ip, "-n", self.ns[node], "-s", "link", "show", "dev", self.dev[node]]).stdout
        tx = int(re.search(r"TX:.*\n\s*(\d+)", text).group(1))
        htb = None
        if self.rate_limited:
            text = sh([self.tc, "-n", self.ns[node], "-s", "class", "show", "dev", self.dev[node]]).stdout
            htb = int(re.search(r"class htb 1:10 .*\n\s*Sent (\d+) bytes", text).group(1))
        return tx, htb


@pytest.fixture(scope="module")
def nodes():
    ip, tc = find_tool("ip"), find_tool("tc")
    if os.geteuid() != 0:
        pytest.skip(f"needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces; uid is {os.geteuid()}")
    if ip is None:
        pytest.skip("iproute2's `ip` not found (apt-get install iproute2)")
    net = TwoNodes(ip, tc)
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum, _frame):  # Bazel's timeout: clean up, then die of the signal
        net.destroy()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        why = net.create()
        if why is not None:
            pytest.skip(why)
        print(f"\ntwo nodes: {net.ns[0]} ({ADDRS[0]}) <-> {net.ns[1]} ({ADDRS[1]}), "
              + (f"htb rate {RATE}" if net.rate_limited else "NOT rate limited"))
        if net.note:
            print("NOTE: " + net.note)
        yield net
    finally:
        net.destroy()
        signal.signal(signal.SIGTERM, previous)


def losses(output):
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^(?:\[rank 0\] )?step (\d+) loss ([0-9.]+)", output, re.M)}


def run_in_process(args):
    p = subprocess.run([OLTRAIN] + TINY + args, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_nodes(net, nproc, args, bind=ADDRS, master=(ADDRS[0], MASTER_PORT)):
    """olrun on both nodes at once; returns [(exit code, output) of node 0, of node 1], seconds.
    net None: both "nodes" run in this machine's own network namespace."""
    env = dict(os.environ, OLRUN_TRAINER=OLTRAIN, OL_JOB_TOKEN=secrets.token_hex(16),
               OL_HEARTBEAT_TIMEOUT_MS="1500", OL_CONNECT_TIMEOUT_MS="20000")
    procs = []
    start = time.time()
    for node in (0, 1):
        where = [] if net is None else [net.ip, "netns", "exec", net.ns[node]]
        cmd = where + [OLRUN, "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", str(nproc),
                       "--master-addr", master[0], "--master-port", str(master[1]), "--report-s", "1",
                       "--grace-s", "2", "--config", CONFIG] + TINY + args
        procs.append(subprocess.Popen(cmd, env=dict(env, OL_BIND_ADDR=bind[node]), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    results = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=max(1, HANG_GUARD_S - (time.time() - start)))
            results.append((p.returncode, out))
    finally:
        for p in procs:  # `ip netns exec` execs olrun: killing it takes its ranks too (PDEATHSIG)
            if p.poll() is None:
                p.kill()
                p.wait()
    return results, time.time() - start


def checkpoint_files(root):
    found = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, root)] = f.read()
    return found


def check_equal_to_one_process(net, tmp_path, nproc, layout):
    steps = ["--steps=4"]
    local = run_in_process(steps + layout + [f"--checkpoint_dir={tmp_path}/local"])
    before = [net.tx_bytes(n) for n in (0, 1)]
    (node0, node1), seconds = run_two_nodes(net, nproc, steps + layout + [f"--checkpoint_dir={tmp_path}/nodes"])
    after = [net.tx_bytes(n) for n in (0, 1)]
    assert node0[0] == 0 and node1[0] == 0, node0[1] + node1[1]
    print(f"2 nodes x {nproc} {' '.join(layout)}: {seconds:.1f} s; sent node0 {after[0][0] - before[0][0]} B, "
          f"node1 {after[1][0] - before[1][0]} B")
    assert "TCP transport" in node0[1], node0[1]
    assert f"ranks {nproc}-{2 * nproc - 1} of world {2 * nproc}" in node1[1], node1[1]
    # The losses rank 0 prints (%.6f) equal the one-process run's ...
    two = losses(node0[1])
    assert sorted(two) == [0, 1, 2, 3], node0[1]
    assert two == losses(local), (two, losses(local))
    # ... and so does every bit of the trained state: weights and optimizer state of every rank.
    a, b = checkpoint_files(f"{tmp_path}/local"), checkpoint_files(f"{tmp_path}/nodes")
    assert sorted(a) == sorted(b) and any(k.endswith("shards.bin") for k in a), (sorted(a), sorted(b))
    for name in a:
        assert a[name] == b[name], f"checkpoint file {name} differs between one process and two nodes"
    # The data crossed the veth both ways (gradients of ~30k parameters per step, 4 steps).
    for node in (0, 1):
        assert after[node][0] - before[node][0] > 100_000, (node, before, after)
        if net.rate_limited:
            assert after[node][1] - before[node][1] > 100_000, (node, before, after)


def test_two_nodes_one_process_each_equal_one_process(nodes, tmp_path):
    check_equal_to_one_process(nodes, tmp_path, 1, ["--dp=2"])


def test_two_nodes_two_processes_each_equal_one_process(nodes, tmp_path):
    check_equal_to_one_process(nodes, tmp_path, 2, ["--dp=2", "--tp=2", "--micro_batches=2"])


def check_bad_bind_fails_fast(node0, node1, seconds, bad):
    # The rank that cannot bind says so, naming the address; it aborts the job through the
    # control plane, so rank 0 stops at once naming it and the address, well within the
    # OL_CONNECT_TIMEOUT_MS (20 s here) it would otherwise wait for the missing endpoint.
    assert node0[0] != 0 and node1[0] != 0, node0[1] + node1[1]
    where = re.escape(bad) + r":0: Cannot assign requested address"
    assert re.search(r"\[rank 1\].*bind to " + where, node1[1]), node1[1]
    assert re.search(r"\[rank 0\].*rank 1 \(.*aborted the job.*bind to " + where, node0[1]), node0[1]
    assert seconds < 10, seconds


def test_binding_an_address_the_node_does_not_have_fails_naming_it(nodes):
    # Node 1 asks for node 0's address, which is not on node 1's interfaces.
    (node0, node1), seconds = run_two_nodes(nodes, 1, ["--steps=2", "--dp=2"], bind=(ADDRS[0], ADDRS[0]))
    check_bad_bind_fails_fast(node0, node1, seconds, ADDRS[0])


def test_bad_bind_address_fails_fast_on_loopback_too():
    # The same failure without namespaces (runs where the tests above skip): two "nodes" on this
    # machine's loopback, node 1 told to bind TEST-NET-1's 192.0.2.1, which no interface has
    # (bind() fails locally; nothing is sent anywhere).
    (node0, node1), seconds = run_two_nodes(None, 1, ["--steps=2", "--dp=2"], bind=("127.0.0.1", "192.0.2.1"),
                                            master=("127.0.0.1", free_port()))
    check_bad_bind_fails_fast(node0, node1, seconds, "192.0.2.1")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-rs", "-s"]))
