#!/usr/bin/env python3
"""Slurm and hetpool side by side on this machine (issue 63).

Starts Debian's Slurm (slurmctld + slurmd on loopback, one 64-CPU node whose CPUs are
the consumable (select/cons_tres, CR_CPU: one /bin/true takes one CPU, not the node), munge on a
private socket, Slurm's default scheduler and intervals; MaxJobCount raised from 10,000 to
100,000, which the queued jobs of the submission measures pass) and hetpool (hetpoold with its embedded store and one agent
simulating a 64-CPU node, jobs confined in cgroups when run as root), both as users run them,
and measures, alternating the two, --rounds times:

  trivial       --jobs one-process jobs running /bin/true, submitted through each CLI by 8
                clients at once (sbatch --wrap vs hetpoolctl submit), jobs/s until all ended
  array         one array of --jobs /bin/true tasks (sbatch --array vs hetpoolctl submit
                --array), jobs/s until all ended
  cli           CLI submissions/s, 8 clients (each its own user) for --cli-seconds, of jobs that
                queue (64 CPUs asked while one is taken)
  start         one job's start on an idle system: submit to its first line of output, seconds
  backlog       a 1-CPU job's start, submit to its first line, behind 5,000 pending 64-CPU jobs
                (one 1-CPU job runs, so none of them fits; the 1-CPU job does), seconds
  api           submissions/s through each API, 8 clients for --cli-seconds, jobs held (Slurm:
                libslurm's slurm_submit_batch_job with priority 0, built here from
                slurm_api_submit.c; hetpool: tests/bench/submit_load, each submission durable)

and prints medians and spreads (min-max) with the ratios (hetpool over Slurm; for the start,
Slurm over hetpool, so above 1 is hetpool's lead everywhere). --docs FILE replaces the block
between the markers <!-- slurm-side-by-side:begin --> and <!-- ...:end --> in FILE.

Never run by CI: --install installs slurm-wlm, munge and libslurm-dev with apt-get first.
  tests/bench/slurm_side_by_side/run.py [--install] [--build build] [--rounds 3] [--jobs 300]
                                        [--cli-seconds 20] [--backlog 5000] [--patience 60]
                                        [--docs docs/benchmarks.md]
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CPUS = 64


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_processes(procs, patience):
    # The last started first (the agent before its daemon, slurmd before slurmctld).
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(patience)
        except subprocess.TimeoutExpired:
            p.kill()


def wait_until(condition, timeout, what, period=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(period)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}")


class Slurm:
    """slurmctld and slurmd for one 64-CPU node, and munged, all under one directory."""

    def __init__(self, root):
        self.root = root
        self.procs = []
        self.conf = os.path.join(root, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def start(self):
        r = self.root
        for d in ("state", "spool", "out"):
            os.makedirs(os.path.join(r, d), exist_ok=True)
        key = os.path.join(r, "munge.key")
        subprocess.run(["mungekey", "-c", "-f", "-k", key], check=True)
        os.chmod(key, 0o600)
        self.munge_socket = os.path.join(r, "munge.sock")
        self.procs.append(subprocess.Popen(
            ["munged", "-F", "-f", f"--socket={self.munge_socket}", f"--key-file={key}",
             f"--pid-file={r}/munged.pid", f"--log-file={r}/munged.log", f"--seed-file={r}/munged.seed"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_until(lambda: os.path.exists(self.munge_socket), 10, "munged")
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=bench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/slurmctld.log
SlurmdLogFile={r}/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
MaxJobCount=100000
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs={CPUS} RealMemory=262144 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
""")
        self.procs.append(subprocess.Popen(["slurmctld", "-D", "-i", "-f", self.conf], env=self.env,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.procs.append(subprocess.Popen(["slurmd", "-D", "-N", "localhost", "-f", self.conf], env=self.env,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        def idle():
            out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True)
            return out.returncode == 0 and out.stdout.strip() == "idle"

        wait_until(idle, 60, "the Slurm node to be idle", 0.2)

    def stop(self):
        # Its jobs first: slurmstepd outlives slurmd, and a blocker would sleep on.
        subprocess.run(["scancel", "--full", "-u", "root"], env=self.env, capture_output=True)
        wait_until(self.idle, 30, "Slurm's jobs to be cancelled", 0.2)
        stop_processes(self.procs, 10)

    def submit(self, args, user=None):
        env = self.env if user is None else dict(self.env, USER=user)
        out = subprocess.run(["sbatch", "--parsable", "-o", os.path.join(self.root, "out", "%j.out")] + args,
                             env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"sbatch: {out.stderr.strip()}")
        return out.stdout.strip().split(";")[0]

    def idle(self):
        out = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, capture_output=True, text=True)
        return out.returncode == 0 and out.stdout.strip() == ""

    def job_command(self, command, cpus=1):
        return ["-c", str(cpus), "--wrap", command]

    def array_args(self, count):
        return [f"--array=0-{count - 1}"]

    def api_submissions(self, seconds, build):
        program = os.path.join(self.root, "slurm_api_submit")
        subprocess.run(["cc", "-O2", "-o", program, os.path.join(os.path.dirname(__file__), "slurm_api_submit.c"),
                        "-lslurm", "-lpthread"], check=True)
        out = subprocess.run([program, "8", str(seconds)], env=self.env, capture_output=True, text=True, check=True)
        return float(out.stdout.split()[1])

    def first_line(self, job_id):
        path = os.path.join(self.root, "out", f"{job_id}.out")
        try:
            with open(path) as f:
                return f.readline().strip()
        except OSError:
            return ""


class Hetpool:
    """hetpoold (embedded store) and one agent simulating a 64-CPU node, plaintext on loopback."""

    def __init__(self, root, build):
        self.root = root
        self.bin = os.path.join(build, "src")
        self.procs = []
        self.work = os.path.join(root, "work")

    def start(self):
        r = self.root
        os.makedirs(self.work, exist_ok=True)
        os.chmod(self.work, 0o1777)
        port_file = os.path.join(r, "port")
        self.procs.append(subprocess.Popen(
            [f"{self.bin}/hetpoold", "--listen", "127.0.0.1:0", "--data-dir", f"{r}/daemon", "--port-file",
             port_file, "--insecure", "--log-level", "warn"],
            stdout=open(f"{r}/hetpoold.log", "w"), stderr=subprocess.STDOUT))
        wait_until(lambda: os.path.exists(port_file) and os.path.getsize(port_file) > 0, 20, "hetpoold")
        with open(port_file) as f:
            self.server = f"127.0.0.1:{f.read().strip()}"
        inventory = os.path.join(r, "node.json")
        with open(inventory, "w") as f:
            json.dump({"hostname": "bench-node", "cpus": CPUS, "memory_mib": 262144, "devices": []}, f)
        self.procs.append(subprocess.Popen(
            [f"{self.bin}/hetpool-agent", "--server", self.server, "--node-name", "bench-node", "--work-dir",
             f"{r}/agent", "--backend", "sim", "--inventory", inventory, "--insecure", "--job-dirs", self.work,
             "--log-level", "warn"],
            stdout=open(f"{r}/agent.log", "w"), stderr=subprocess.STDOUT))
        wait_until(lambda: "Ready" in self.cli(["nodes"]).stdout or "READY" in self.cli(["nodes"]).stdout, 30,
                   "the hetpool node to be ready", 0.2)

    def stop(self):
        stop_processes(self.procs, 20)

    def cli(self, args, user=None):
        env = dict(os.environ, HETPOOL_SERVER=self.server)
        if user is not None:
            env["USER"] = user
        return subprocess.run([f"{self.bin}/hetpoolctl", "--insecure"] + args, env=env, capture_output=True,
                              text=True, cwd=self.work)

    def job_command(self, command, cpus=1):
        # One job file per command (the CLI reads it each time, as sbatch reads its script).
        path = os.path.join(self.root, f"job-{cpus}-{abs(hash(command))}.json")
        if not os.path.exists(path):
            with open(path, "w") as f:
                json.dump({"command": ["/bin/sh", "-c", command], "working_dir": self.work, "nnodes": 1,
                           "devices_per_node": 0, "procs_per_node": 1,
                           "host": {"cpu_milli_per_process": 1000 * cpus}}, f)
        return ["-f", path]

    @staticmethod
    def api_submissions(seconds, build):
        # Its own hetpoold, no agent: every job stays pending, as Slurm's held ones do.
        out = subprocess.run([os.path.join(build, "tests", "submit_load"), "--clients", "8", "--seconds", str(seconds)],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])["submissions_per_second"]

    def array_args(self, count):
        return ["--array", f"0-{count - 1}"]

    def submit(self, args, user=None):
        out = self.cli(["submit"] + args, user)
        if out.returncode != 0:
            raise RuntimeError(f"hetpoolctl submit: {out.stdout.strip()} {out.stderr.strip()}")
        return out.stdout.strip()

    def idle(self):
        out = self.cli(["list", "--state", "pending", "--state", "scheduled", "--state", "running", "-o", "json"])
        return out.returncode == 0 and '"id"' not in out.stdout

    def first_line(self, job_id):
        out = self.cli(["logs", job_id, "--raw"])
        return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout else ""


def trivial_jobs(system, jobs):
    args = system.job_command("/bin/true")
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: system.submit(args, user=f"sweeper{i % 8}"), range(jobs)))
    wait_until(system.idle, 600, "every job to end", 0.05)
    return jobs / (time.monotonic() - start)


def array_jobs(system, jobs):
    start = time.monotonic()
    system.submit(system.array_args(jobs) + system.job_command("/bin/true"))
    wait_until(system.idle, 600, "every task to end", 0.05)
    return jobs / (time.monotonic() - start)


def keep_busy(system):
    # One 1-CPU job runs, so no job of the node's 64 CPUs fits until it ends (600 s).
    blocker = system.submit(system.job_command("echo started; sleep 600"))
    wait_until(lambda: system.first_line(blocker) == "started", 60, "the 1-CPU job that keeps the node busy", 0.05)


def cli_submissions(system, seconds):
    # Submissions, not runs: the jobs ask the node's 64 CPUs while one CPU is taken, so they
    # queue on both (hetpool runs jobs 5x as fast, which would count against its submissions).
    keep_busy(system)
    args = system.job_command("/bin/true", cpus=CPUS)
    deadline = time.monotonic() + seconds
    counts = [0] * 8

    def client(i):
        while time.monotonic() < deadline:
            system.submit(args, user=f"client{i}")
            counts[i] += 1

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(client, range(8)))
    # Thousands of jobs are left queued: the round ends here and the system is stopped.
    return sum(counts) / (time.monotonic() - start)


def start_latency(system):
    start = time.monotonic()
    job = system.submit(system.job_command("echo first-line"))
    wait_until(lambda: system.first_line(job) == "first-line", 60, "the job's first line", 0.005)
    return time.monotonic() - start


def backlog_start(system, backlog, patience):
    # None of the 64-CPU jobs fits behind the running 1-CPU one; then a 1-CPU job, which does.
    keep_busy(system)
    args = system.job_command("sleep 1", cpus=CPUS)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: system.submit(args, user=f"backlog{i % 8}"), range(backlog)))
    start = time.monotonic()
    job = system.submit(system.job_command("echo first-line"))
    try:
        wait_until(lambda: system.first_line(job) == "first-line", patience, "the small job's first line", 0.05)
    except RuntimeError:
        return float(patience)  # not started: recorded as the patience (it took at least that)
    return time.monotonic() - start


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--install", action="store_true", help="apt-get install slurm-wlm munge first")
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--cli-seconds", type=int, default=20)
    parser.add_argument("--backlog", type=int, default=5000)
    parser.add_argument("--patience", type=int, default=60, help="how long the backlog's small job is waited for")
    parser.add_argument("--docs", help="replace the side-by-side block in this markdown file")
    args = parser.parse_args()
    if args.install:
        subprocess.run(["apt-get", "update", "-q"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-q", "slurm-wlm", "munge", "libslurm-dev"], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    for program in ("slurmctld", "slurmd", "sbatch", "munged", "mungekey", "cc"):
        if shutil.which(program) is None:
            sys.exit(f"{program} not found: run with --install (apt-get install slurm-wlm munge)")
    root = tempfile.mkdtemp(prefix="slurm-side-by-side-")
    results = {name: {"slurm": [], "hetpool": []} for name in ("trivial", "array", "cli", "api", "start", "backlog")}

    def fresh(name, where):
        os.makedirs(where)
        system = Slurm(where) if name == "slurm" else Hetpool(where, args.build)
        system.start()
        return system

    for round_ in range(args.rounds):
        # Alternating: Slurm first in even rounds, hetpool first in odd ones; the measures that
        # leave jobs queued (cli, backlog, api) each end a system's life: the next starts fresh.
        order = ["slurm", "hetpool"] if round_ % 2 == 0 else ["hetpool", "slurm"]
        for name in order:
            system = fresh(name, os.path.join(root, f"{name}-{round_}"))
            try:
                results["start"][name].append(start_latency(system))
                results["trivial"][name].append(trivial_jobs(system, args.jobs))
                results["array"][name].append(array_jobs(system, args.jobs))
                results["cli"][name].append(cli_submissions(system, args.cli_seconds))
            finally:
                system.stop()
            system = fresh(name, os.path.join(root, f"{name}-{round_}-backlog"))
            try:
                results["backlog"][name].append(backlog_start(system, args.backlog, args.patience))
            finally:
                system.stop()
            if name == "slurm":
                system = fresh(name, os.path.join(root, f"{name}-{round_}-api"))
                try:
                    results["api"][name].append(system.api_submissions(args.cli_seconds, args.build))
                finally:
                    system.stop()
            else:
                results["api"][name].append(Hetpool.api_submissions(args.cli_seconds, args.build))
            print(f"round {round_ + 1} {name}: " + ", ".join(f"{k} {v[name][-1]:.3g}" for k, v in results.items()),
                  file=sys.stderr, flush=True)
    rows = [("trivial", f"{args.jobs} trivial one-process jobs (/bin/true, 8 CLI clients), jobs/s", False),
            ("array", f"an array of {args.jobs} trivial tasks, jobs/s", False),
            ("cli", f"CLI submissions/s, 8 clients for {args.cli_seconds} s", False),
            ("api", f"API submissions/s, 8 clients for {args.cli_seconds} s (hetpool: each stored durably)", False),
            ("start", "one job's start on an idle system, submit to its first line, s", True),
            ("backlog", f"a 1-CPU job's start behind {args.backlog} pending 64-CPU jobs, s "
                        f"({args.patience}: not started in that time)", True)]
    lines = ["| | Slurm 22.05 | hetpool | ratio |", "|---|---|---|---|"]
    out = {}
    for key, label, lower_is_better in rows:
        s, h = summary(results[key]["slurm"]), summary(results[key]["hetpool"])
        ratio = s["median"] / h["median"] if lower_is_better else h["median"] / s["median"]
        out[key] = {"slurm": s, "hetpool": h, "ratio": ratio}
        fmt = (lambda v: f"{v:.3f}") if lower_is_better else (lambda v: f"{v:.1f}")
        lines.append(f"| {label} | {fmt(s['median'])} ({fmt(s['min'])}-{fmt(s['max'])}) | "
                     f"{fmt(h['median'])} ({fmt(h['min'])}-{fmt(h['max'])}) | {ratio:.2f} |")
    table = "\n".join(lines)
    print(json.dumps(out, indent=1))
    print(table)
    if args.docs:
        begin, end = "<!-- slurm-side-by-side:begin -->", "<!-- slurm-side-by-side:end -->"
        with open(args.docs) as f:
            text = f.read()
        if begin not in text or end not in text:
            sys.exit(f"{args.docs} has no {begin} ... {end} block")
        block = (f"{begin}\nMedians of {args.rounds} alternating rounds (min-max), "
                 f"`tests/bench/slurm_side_by_side/run.py --rounds {args.rounds} --jobs {args.jobs} "
                 f"--cli-seconds {args.cli_seconds} --backlog {args.backlog} --patience {args.patience}`:\n\n"
                 f"{table}\n{end}")
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
        with open(args.docs, "w") as f:
            f.write(text)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
