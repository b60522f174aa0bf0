"""Launch N training workers on this machine, as N machines would run them (for local tests
of multi-worker training):

    python -m keras_transformer.training.launch --workers 2 -- --config tiny --train-steps 60
    python -m keras_transformer.training.launch --workers 2 -- python my_script.py --flag

Arguments after `--` that start with `-` are flags of the training command
(`keras-transformer-train`, `pipelines/train_wmt.py`); anything else is the whole command to
run. Each process gets a free port on 127.0.0.1, its own `TF_CONFIG`
(`{"cluster": {"worker": [...]}, "task": ...}`, with `--chief` a separate `chief` task) and
`CUDA_VISIBLE_DEVICES=""`; with `--gpus` each process gets its own GPUs instead, the visible
ones split evenly (`--gpus-per-worker N`: N each, from the first), so that no two processes
map the same GPU's memory. Output lines are prefixed with the task name.
If a worker fails, the others are stopped (SIGTERM, then SIGKILL after `--grace-s`) and the
launcher exits with the failing code; rerunning the same command resumes all workers from the
chief's last checkpoint. SIGTERM or Ctrl-C to the launcher reaches every worker as SIGTERM:
they agree on a step, the chief writes its checkpoint, and all exit with status 143, as
does the launcher.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from keras_transformer.training.errors import PREEMPTED_STATUS


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports that were free a moment ago (bound, read, released together)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]


def cluster_spec(workers: int, ports: list[int], chief: bool = False) -> dict[str, list[str]]:
    """`{"worker": [...]}`, or with `chief` `{"chief": [first], "worker": [the rest]}`."""
    addresses = [f"127.0.0.1:{port}" for port in ports]
    if chief:
        return {"chief": addresses[:1], "worker": addresses[1:workers]}
    return {"worker": addresses[:workers]}


def tasks(cluster: dict[str, list[str]]) -> list[tuple[str, int]]:
    return [
        (job, index) for job in ("chief", "worker") for index in range(len(cluster.get(job, [])))
    ]


def training_command(args: list[str]) -> list[str]:
    """The command to launch: `args` itself, or the training command
    (`keras_transformer.cli.train`, as `pipelines/train_wmt.py` runs it) with `args` as flags."""
    if args and not args[0].startswith("-"):
        return list(args)
    return [sys.executable, "-m", "keras_transformer.cli.train", *args]


def visible_gpus(environ=None, run=subprocess.run) -> list[str]:
    """The GPUs to hand out: `CUDA_VISIBLE_DEVICES`'s entries if it is set, else the indices of
    the GPUs `nvidia-smi -L` lists (none without it). TensorFlow is not asked: it would map
    the GPUs' memory in the launcher's own process."""
    environ = os.environ if environ is None else environ
    given = environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [device.strip() for device in given.split(",") if device.strip()]
    try:
        listed = run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [str(i) for i, _ in enumerate(x for x in listed.splitlines() if x.startswith("GPU "))]


def split_gpus(gpus: list[str], tasks: int, per_task: int | None = None) -> list[str]:
    """Each task's `CUDA_VISIBLE_DEVICES`: disjoint groups of `per_task` of `gpus`, in order
    (default: all of them split evenly). Raises ValueError naming the values when they do not
    split so."""
    share = per_task
    if share is None:
        share = len(gpus) // tasks if len(gpus) % tasks == 0 else 0
    if share < 1 or share * tasks > len(gpus):
        asked = "" if per_task is None else f", gpus_per_worker={per_task}"
        raise ValueError(
            f"--gpus needs as many GPUs for each of the {tasks} tasks, from {len(gpus)} "
            f"visible. Received: gpus={','.join(gpus) or 'none'}, workers={tasks}{asked}"
        )
    return [",".join(gpus[i * share : (i + 1) * share]) for i in range(tasks)]


def _relay(process: subprocess.Popen, prefix: str) -> None:
    for line in process.stdout:
        sys.stdout.write(f"{prefix} {line}")
        sys.stdout.flush()


def launch(
    command: list[str], workers: int, chief: bool = False, gpus: bool = False,
    grace_s: float = 30.0, gpus_per_worker: int | None = None,
) -> int:  # fmt: skip
    """Run `command` as `workers` tasks of one cluster; returns 0 or the first failing code.
    With `gpus`, each task gets its own `gpus_per_worker` (default: an even share) of the
    `visible_gpus()`, else none."""
    if workers < 1 or (chief and workers < 2):
        raise ValueError(f"workers must be >= 1 (>= 2 with a chief). Received: workers={workers}")
    cluster = cluster_spec(workers, free_ports(workers), chief)
    jobs = tasks(cluster)
    devices = split_gpus(visible_gpus(), len(jobs), gpus_per_worker) if gpus else [""] * len(jobs)
    processes: list[tuple[str, subprocess.Popen]] = []
    for (job, index), visible in zip(jobs, devices):
        env = dict(os.environ, PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES=visible)
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": job, "index": index}})
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            errors="replace",
        )  # fmt: skip
        name = f"[{job}:{index}]"
        threading.Thread(target=_relay, args=(process, name), daemon=True).start()
        processes.append((name, process))
    return _wait(processes, grace_s)


def _stop(processes, grace_s: float) -> None:
    for _, process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for _, process in processes:
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class _Terminated(Exception):
    """The launcher received SIGTERM (its machine is being preempted)."""


def _raise_terminated(signum, frame):
    raise _Terminated()


def _wait(processes, grace_s: float) -> int:
    """Until all exit 0, or one fails (the others are stopped); on SIGTERM or Ctrl-C the
    workers get SIGTERM and `grace_s` to checkpoint and stop (`training.preemption`): the
    launcher then exits 143 if they all stopped so, else 130 (Ctrl-C) or 143 (SIGTERM)."""
    main = threading.current_thread() is threading.main_thread()  # handlers: main only
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main else None
    try:
        while True:
            codes = [(name, process.poll()) for name, process in processes]
            failed = [(name, code) for name, code in codes if code not in (None, 0)]
            if failed:
                name, code = failed[0]
                print(f"launch: {name} exited with code {code}; stopping the others", flush=True)
                _stop(processes, grace_s)
                return code if code > 0 else 128 - code  # killed by signal -code
            if all(code == 0 for _, code in codes):
                return 0
            time.sleep(0.5)
    except (KeyboardInterrupt, _Terminated) as stop:
        print(f"launch: {type(stop).__name__}: stopping the workers", flush=True)
        _stop(processes, grace_s)
        codes = {process.returncode for _, process in processes}
        if codes == {PREEMPTED_STATUS} or isinstance(stop, _Terminated):
            return PREEMPTED_STATUS
        return 130
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    own, rest = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m keras_transformer.training.launch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workers", type=int, default=2, help="processes in all (default: 2)")
    parser.add_argument(
        "--chief", action="store_true", help="make the first process a 'chief' task"
    )
    parser.add_argument(
        "--gpus", action="store_true",
        help="give each process its own GPUs: the visible ones split evenly (default: none)",
    )  # fmt: skip
    parser.add_argument(
        "--gpus-per-worker", type=int, default=None, metavar="N",
        help="with --gpus: N GPUs each, from the first (default: an even share)",
    )  # fmt: skip
    parser.add_argument(
        "--grace-s", type=float, default=30.0,
        help="seconds the others get to stop after one fails (default: 30)",
    )  # fmt: skip
    args = parser.parse_args(own)
    try:
        command = training_command(rest)
        gpus = args.gpus or args.gpus_per_worker is not None
        return launch(command, args.workers, args.chief, gpus, args.grace_s, args.gpus_per_worker)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
