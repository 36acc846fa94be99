"""Run the processes of a Procfile side by side, their output prefixed with their name, and stop
them cleanly: `python bin/procfile.py [Procfile]` (what `bin/run` ends with).

Why not honcho: on Ctrl-C it sends SIGTERM to each process *group*, so the Celery worker's pool
children are terminated under their parent ("ForkPoolWorker exited with signal 15"), the worker's
warm shutdown then waits for them, and after 5 s honcho SIGKILLs it. Here each process runs in its
own session (Ctrl-C in the terminal reaches only this launcher), and a stop sends SIGTERM to each
main process alone: gunicorn's master stops its workers, Celery's worker finishes its running
tasks and stops its pool, beat saves its state. Only a process still running after
`PROCFILE_STOP_TIMEOUT` seconds (default 60) has its group killed, and that is said.

Exit status: 0 when every process stopped cleanly after Ctrl-C or SIGTERM (exit status 0, or ended
by the SIGTERM sent to it: a process still starting has no handler yet and nothing to finish); 1
when a process exited by itself (the others are then stopped), failed while stopping, or had to be
killed.
"""

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime

LINE = re.compile(r"^([A-Za-z0-9_-]+):\s*(.+)$")


def read_procfile(path: str) -> list[tuple[str, str]]:
    entries = []
    with open(path, encoding="utf-8") as procfile:
        for line in procfile:
            match = LINE.match(line.strip())
            if match and not line.lstrip().startswith("#"):
                entries.append((match.group(1), match.group(2)))
    if not entries:
        sys.exit(f"{path}: no processes")
    return entries


class Launcher:
    def __init__(self, entries: list[tuple[str, str]], stop_timeout: float):
        self.entries = entries
        self.stop_timeout = stop_timeout
        self.width = max(len(name) for name, _ in [*entries, ("system", "")])
        self.output = threading.RLock()  # a signal handler may print while the main thread does
        self.processes: dict[str, subprocess.Popen] = {}
        self.relays: list[threading.Thread] = []
        self.stop_requested: str | None = None
        self.hurry = False  # a second Ctrl-C: kill what is left now

    def say(self, name: str, text: str) -> None:
        with self.output:
            sys.stdout.write(f"{datetime.now():%H:%M:%S} {name.ljust(self.width)} | {text}\n")
            sys.stdout.flush()

    def start(self) -> None:
        for name, command in self.entries:
            if self.stop_requested:  # Ctrl-C while starting: start no more
                break
            # `exec`: the shell expands ${VARS} and is replaced, so the pid is the process itself.
            process = subprocess.Popen(
                ["/bin/sh", "-c", f"exec {command}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.processes[name] = process
            relay = threading.Thread(target=self.relay, args=(name, process), daemon=True)
            relay.start()
            self.relays.append(relay)
            self.say("system", f"{name} started (pid {process.pid})")
        if self.stop_requested:  # the signal came between starting a process and recording it
            self.terminate_all()

    def relay(self, name: str, process: subprocess.Popen) -> None:
        for raw in iter(process.stdout.readline, b""):
            self.say(name, raw.decode(errors="replace").rstrip("\n"))

    def request_stop(self, signum: int, frame=None) -> None:
        if self.stop_requested is None:
            self.stop_requested = signal.Signals(signum).name
            self.say(
                "system", f"{self.stop_requested} received: stopping (up to {self.stop_timeout:g} s; Ctrl-C again to kill now)"
            )
            self.terminate_all()
        elif signum == signal.SIGINT:
            self.hurry = True

    def terminate_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)  # the main process only: it stops its own children

    def run(self) -> int:
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGHUP, self.request_stop)  # the terminal closed: the children are in sessions of their own
        self.start()
        clean = True
        deadline = None
        reported: set[str] = set()
        while True:
            for name, process in self.processes.items():
                code = process.poll()
                if code is not None and name not in reported:
                    reported.add(name)
                    self.relays[list(self.processes).index(name)].join(timeout=2)  # its last lines first
                    self.say("system", f"{name} stopped (exit status {code})")
                    if self.stop_requested is None:  # it stopped by itself: stop the others
                        clean = False
                        self.stop_requested = f"{name} exited"
                        self.terminate_all()
                    elif code not in (0, -signal.SIGTERM):
                        clean = False
            if len(reported) == len(self.processes):
                break
            if self.stop_requested and deadline is None:
                deadline = time.monotonic() + self.stop_timeout
            if deadline is not None and (time.monotonic() > deadline or self.hurry):
                for name, process in self.processes.items():
                    if process.poll() is None:
                        self.say(
                            "system",
                            f"{name} killing it"
                            if self.hurry
                            else f"{name} did not stop within {self.stop_timeout:g} s: killing it",
                        )
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(process.pid, signal.SIGKILL)
                clean = False
                deadline = float("inf")
            time.sleep(0.1)
        return 0 if clean else 1


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "Procfile"
    return Launcher(read_procfile(path), float(os.environ.get("PROCFILE_STOP_TIMEOUT", "60"))).run()


if __name__ == "__main__":
    sys.exit(main())
