#!/usr/bin/python3
"""Fault drills: each drill does to a 2-rank dtrain job what goes wrong on a cluster
and prints one line: what was done, how long until every rank had exited, the exit codes, and
whether the resumed run ends with the uninterrupted run's training state, bit for bit. Then
what a checkpoint costs: the MLP's against its epoch (goal <= 5 %) and VGG-16's (33.6M
parameters; goal <= 2 s). Exits 1 when a drill fails (tests/app runs it with --quick).

No drill depends on the machine's speed: a job that a drill signals is asked for far more
epochs than it can reach (only the drill ends it), the drill waits for what the job writes
(timing.csv's rows, a checkpoint) for as long as the job runs, and the SIGTERM drill compares
its resumed run with an uninterrupted one of the length where the signal stopped it. The only
clocks are the drills' own bounds on how fast the job ends once hurt (they are what the drills
assert), and the checkpoint costs, which --quick prints for information: a loaded machine
cannot measure them.

  /usr/bin/python3 bench/fault_drills.py --build build-cpu [--quick] [--out DIR]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tests", "app", "checkpoint_tool.py")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

MLP = """name: drill
seed: 2
model: {{name: mlp, hidden: [256]}}
dataset: {{name: fashion_mnist, path: /usr/share/datasets/fashion-mnist, batch_size: 32,
          train_size: {train}, test_size: 1000}}
optimizer: {{lr: 0.02, momentum: 0.9, schedule: {{name: step, every_epochs: 1, gamma: 0.7}}}}
train: {{epochs: {epochs}}}
checkpoint: {{every_epochs: 1, keep: 3}}
cluster: {{timeout_s: 5}}
"""


# What a signalled job is asked for: more epochs than any drill waits, so that it is still
# training when its signal comes, however fast the machine.
HELD = ["--set", "train.epochs=100000"]
# A hurt or signalled job still running this long after the drill hurt it is killed and reads
# "hung" (a failure), so that a broken drill ends rather than waiting for CTest's timeout.
HURT_S = 120


class Job:
    """mpirun -np 2 dtrain ..., each rank's exit code recorded by a wrapper shell."""

    started = []

    @classmethod
    def end_all(cls):
        for job in cls.started:
            if job.proc.poll() is None:
                job.proc.kill()
                job.proc.wait()

    def __init__(self, dtrain, args, out, env=None, ranks=2):
        self.rc_dir = tempfile.mkdtemp(prefix="rc.", dir=os.path.dirname(out))
        wrapper = f'"$0" "$@"; rc=$?; echo $rc > {self.rc_dir}/rank.$OMPI_COMM_WORLD_RANK; exit $rc'
        self.log = open(out + ".log", "w")
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            ["mpirun", "-np", str(ranks), "--oversubscribe", "sh", "-c", wrapper, dtrain] + args,
            stdout=self.log, stderr=subprocess.STDOUT, env=dict(ENV, **(env or {})))
        self.ranks = ranks
        self.out = out
        Job.started.append(self)

    def rank_pid(self, rank):
        """The dtrain process of `rank` (found by its environment), waited for while the job runs."""
        while self.proc.poll() is None:
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                    env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
                except OSError:
                    continue
                if cmd and cmd[0].endswith(b"dtrain") and self.out.encode() in b" ".join(cmd) and \
                        f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
                    return int(pid)
            time.sleep(0.05)
        raise RuntimeError(f"rank {rank} of {self.out} not found: the job ended ({self.out}.log)")

    def wait_for(self, what, ready):
        """Polls ready() while the job runs (no time limit: CTest's timeout ends a hang)."""
        while not ready():
            if self.proc.poll() is not None:
                if ready():  # it came just before the end
                    return
                raise RuntimeError(f"{self.out}: the job ended before {what} ({self.out}.log)")
            time.sleep(0.02)

    def wait_for_rows(self, rows):
        """Until timing.csv has `rows` rows (each rank writes one per epoch)."""
        path = os.path.join(self.out, "timing.csv")
        self.wait_for(f"{rows} row(s) of {path}",
                      lambda: os.path.exists(path) and sum(1 for _ in open(path)) >= rows + 1)

    def wait(self, timeout=None):
        """mpirun's exit code and each rank's; `end` is when it exited. `timeout`: a drill's
        bound on how fast a hurt job ends (past it the job is killed and reads "hung")."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = "hung"
        self.end = time.monotonic()
        self.log.close()
        codes = []
        for r in range(self.ranks):
            path = os.path.join(self.rc_dir, f"rank.{r}")
            codes.append(open(path).read().strip() if os.path.exists(path) else "killed")
        shutil.rmtree(self.rc_dir, ignore_errors=True)
        return code, codes

    def text(self):
        return open(self.out + ".log").read()


def newest_checkpoint(run):
    """The folder of RUN's newest checkpoint, or None."""
    r = subprocess.run(["/usr/bin/python3", TOOL, "newest", run], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def completed_epochs(checkpoint):
    """The epochs done before a checkpoint (its manifest's `epoch`)."""
    return int(re.search(r"^epoch: (\d+)$", open(os.path.join(checkpoint, "manifest.yaml")).read(),
                         re.M).group(1))


def same_state(a, b):
    r = subprocess.run(["/usr/bin/python3", TOOL, "same", a, b], capture_output=True, text=True)
    return r.returncode == 0, r.stdout.strip()


def line(name, action, seconds, codes, verdict, ok):
    """Prints a drill's line; ok None: for information (no verdict)."""
    mark = "info" if ok is None else "pass" if ok else "FAIL"
    print(f"{name:<11} {action:<44} {seconds:>7} {codes:<22} {verdict}  [{mark}]", flush=True)
    return ok


def run(args):
    dtrain = os.path.abspath(args.build + "/apps/dtrain/dtrain")
    work = args.out or tempfile.mkdtemp(prefix="drills.")
    os.makedirs(work, exist_ok=True)
    cfg = os.path.join(work, "drill.yaml")
    epochs = 3 if args.quick else 4
    open(cfg, "w").write(MLP.format(train=30000, epochs=epochs))
    base = ["--config", cfg, "--progress", "none"]
    results = []
    print(f"{'drill':<11} {'what was done':<44} {'exited':>7} {'exit codes':<22} result", flush=True)

    # The reference: the same job, never interrupted (more of other lengths when needed).
    references = {}

    def uninterrupted(length):
        if length not in references:
            ref = os.path.join(work, "uninterrupted" + ("" if length == epochs else f"-{length}"))
            code, _ = Job(dtrain, base + ["--set", f"train.epochs={length}", "--out", ref], ref).wait()
            if code != 0:
                sys.exit(f"the uninterrupted run failed: see {ref}.log")
            references[length] = ref
        return references[length]

    ref = uninterrupted(epochs)

    # SIGTERM to rank 0 in epoch 2 (Slurm preemption): exit 143, a checkpoint, resumed == whole.
    # Sent once the checkpoint of epoch 1 is written; the run is resumed to the reference's
    # length, or, where the signal found it later than that, to the epoch after its stop.
    out = os.path.join(work, "sigterm")
    job = Job(dtrain, base + HELD + ["--out", out], out)
    job.wait_for("the first checkpoint", lambda: newest_checkpoint(out) is not None)
    os.kill(job.rank_pid(0), signal.SIGTERM)
    sent = time.monotonic()
    code, codes = job.wait(timeout=HURT_S)
    stopped = re.search(r"stopped (.*?); the checkpoint", job.text())
    checkpoint = newest_checkpoint(out)
    length = max(epochs, completed_epochs(checkpoint) + 1) if checkpoint else epochs
    resumed = Job(dtrain, base + ["--set", f"train.epochs={length}", "--resume", out],
                  out + ".resume").wait()[0]
    same, _ = same_state(uninterrupted(length), out)
    # Each rank exits 143 once the checkpoint is written; the first to exit makes mpirun end the
    # others, so a rank still on its way out reads "killed" (which one, the machine decides).
    ranks_ok = "143" in codes and all(c in ("143", "killed") for c in codes)
    ok = code == 143 and ranks_ok and stopped is not None and resumed == 0 and same
    results.append(line("sigterm", "SIGTERM to rank 0 in epoch 2", f"{job.end - sent:.1f} s",
                        f"mpirun {code}, ranks {'/'.join(codes)}",
                        f"stopped {stopped.group(1) if stopped else '?'}; resumed == "
                        f"uninterrupted: {'yes' if same else 'NO'}", ok))

    # Ctrl-C twice on rank 1: the second one ends it at once.
    out = os.path.join(work, "sigint2")
    job = Job(dtrain, base + HELD + ["--out", out], out)
    job.wait_for_rows(1)
    pid = job.rank_pid(1)
    os.kill(pid, signal.SIGINT)
    os.kill(pid, signal.SIGINT)
    sent = time.monotonic()
    code, codes = job.wait(timeout=HURT_S)
    ok = code not in (0, "hung") and codes[1] in ("130", "killed") and job.end - sent < 10
    results.append(line("sigint x2", "two SIGINTs to rank 1", f"{job.end - sent:.1f} s",
                        f"mpirun {code}, ranks {'/'.join(codes)}", "ended at once", ok))

    # A stalled rank (kill -STOP) with cluster.timeout_s 5: every rank gone within 35 s.
    out = os.path.join(work, "stall")
    job = Job(dtrain, base + HELD + ["--out", out], out)
    job.wait_for_rows(1)
    pid = job.rank_pid(1)
    os.kill(pid, signal.SIGSTOP)
    sent = time.monotonic()
    code, codes = job.wait(timeout=HURT_S)
    message = re.search(r"dtrain: (rank 0: no answer from rank 1 in .*? for \d+ s)", job.text())
    ok = code == 1 and job.end - sent <= 35 and message is not None
    results.append(line("stall", "kill -STOP rank 1 (timeout_s 5)", f"{job.end - sent:.1f} s",
                        f"mpirun {code}, ranks {'/'.join(codes)}",
                        message.group(1) if message else "no message naming the peer", ok))

    # A rank killed outright: mpirun ends the job.
    out = os.path.join(work, "kill9")
    job = Job(dtrain, base + HELD + ["--out", out], out)
    job.wait_for_rows(1)
    os.kill(job.rank_pid(1), signal.SIGKILL)
    sent = time.monotonic()
    code, codes = job.wait(timeout=HURT_S)
    ok = code not in (0, "hung") and job.end - sent <= 35
    results.append(line("kill -9", "SIGKILL to rank 1", f"{job.end - sent:.1f} s",
                        f"mpirun {code}, ranks {'/'.join(codes)}", "the job ended", ok))

    # Rank 1 dies while it writes its second checkpoint (after the temporary file): the first
    # stays intact and --resume finishes the run as if nothing had happened.
    out = os.path.join(work, "in_write")
    job = Job(dtrain, base + ["--out", out], out,
              env={"DTRAIN_TEST_KILL_IN_CHECKPOINT": "1", "DTRAIN_TEST_KILL_AT_CHECKPOINT": "2"})
    code, codes = job.wait()
    resumed_job = Job(dtrain, base + ["--resume", out], out + ".resume")
    resumed = resumed_job.wait()[0]
    from_first = "resuming after epoch 1" in resumed_job.text()
    same, _ = same_state(ref, out)
    ok = code != 0 and resumed == 0 and from_first and same
    results.append(line("in write", "rank 1 killed writing checkpoint 2", "-",
                        f"mpirun {code}, ranks {'/'.join(codes)}",
                        f"resumed {'after epoch 1' if from_first else '?'}; == uninterrupted: "
                        f"{'yes' if same else 'NO'}", ok))

    # A flipped byte in the newest checkpoint: named, skipped, the one before is used.
    out = os.path.join(work, "damaged")
    shutil.copytree(ref, out)
    newest = newest_checkpoint(out)
    victim = os.path.join(newest, "rank-00000.bin")
    data = bytearray(open(victim, "rb").read())
    data[len(data) // 3] ^= 0x08
    open(victim, "wb").write(data)
    resumed_job = Job(dtrain, base + ["--resume", out], out + ".resume")
    resumed = resumed_job.wait()[0]
    named = re.search(r"rank-00000.bin: ('[^']*' fails its checksum)", resumed_job.text())
    same, _ = same_state(ref, out)
    ok = resumed == 0 and named is not None and same
    results.append(line("damaged", "one bit flipped in the newest checkpoint", "-",
                        f"mpirun {resumed}",
                        f"{named.group(1) if named else 'not named'}, skipped; == uninterrupted: "
                        f"{'yes' if same else 'NO'}", ok))

    # What a checkpoint costs: a goal where the machine is quiet (not --quick, the CTest run, on
    # a machine that other jobs load: there it is printed for information).
    mlp_log = open(ref + ".log").read()
    costs = [float(s) for s in re.findall(r"checkpoint_s ([0-9.]+)", mlp_log)]
    epoch_s = [float(s) for s in re.findall(r"epoch \d+/\d+: .*? \| ([0-9.]+) s, ", mlp_log)]
    share = max(costs) / (sum(epoch_s) / len(epoch_s)) if costs and epoch_s else float("inf")
    cost_line = line("cost mlp", f"checkpoint of the MLP ({len(costs)} taken)",
                     f"{max(costs):.3f} s" if costs else "-", "", f"{100 * share:.1f} % of an epoch "
                     f"({sum(epoch_s) / len(epoch_s) if epoch_s else 0:.2f} s; goal <= 5 %)",
                     None if args.quick else share <= 0.05)
    if not args.quick:
        results.append(cost_line)
    if not args.quick:
        out = os.path.join(work, "vgg16")
        vgg = ["--config", os.path.join(ROOT, "configs/paper/pipedream/small/synthetic_vgg16_sync.yaml"),
               "--set", "train.max_iterations=3", "--set", "train.epochs=1",
               "--set", "checkpoint={every_iterations: 2}", "--progress", "none", "--out", out]
        code, _ = Job(dtrain, vgg, out).wait(timeout=600)
        text = open(out + ".log").read()
        params = re.search(r"^parameters: (\d+)", text, re.M)
        cost = re.findall(r"checkpoint_s ([0-9.]+)", text)
        ok = code == 0 and bool(cost) and float(cost[0]) <= 2.0
        results.append(line("cost vgg16", f"checkpoint of VGG-16 ({params.group(1) if params else '?'} "
                            "parameters)", f"{float(cost[0]):.3f} s" if cost else "-", "",
                            "goal <= 2 s", ok))
    passed = all(results)
    note = "; --quick: the cost for information" if args.quick else ""
    if args.out or not passed:
        print(f"{sum(results)}/{len(results)} drills passed; runs in {work}{note}")
    else:  # a temporary folder (about 50 MB) is kept only to look into a failure
        shutil.rmtree(work, ignore_errors=True)
        print(f"{sum(results)}/{len(results)} drills passed{note}")
    return passed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default="build-cpu")
    p.add_argument("--quick", action="store_true", help="the CTest size: no VGG-16")
    p.add_argument("--out", help="keep the runs here (else a temporary folder, removed when all pass)")
    try:
        ok = run(p.parse_args())
    finally:  # a drill that failed midway leaves no job of its own behind (a held one would run on)
        Job.end_all()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
