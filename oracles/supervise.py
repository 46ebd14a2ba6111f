"""A launcher that ties a command's life to this process's: run_command's commands (in a
worker, and in repro.py, which pastes its source) and the scripts oracles/script_run.py
runs. Torch-free: `trtmin repros run` imports it before any repro starts."""

from __future__ import annotations

import os
import sys

# Runs the command (in a worker, and in repro.py) or the script: it gets a process group of
# its own, and this launcher waits for it. When the process that started it dies (a worker
# killed for --timeout, repro.py's child killed for a hang, trtmin killed by kill -9), or
# this launcher is sent SIGTERM, SIGINT or SIGHUP (unless ignored; a terminal's Ctrl-C or
# hang-up reaches the whole foreground group, this launcher too, but not the command, in a
# group of its own: a KeyboardInterrupt here left the command running under init),
# PR_SET_PDEATHSIG wakes the launcher, which ends the whole group (a shell script's own
# children too, which a PDEATHSIG on the command alone left running) and removes the folder
# of exported files. When the command ends, what it left running in its group is ended too.
# Ending is SIGTERM, then SIGKILL after up to a second each: a launcher in the group (a cmd:
# repro.py's, run by `repros run`'s) then ends its own command's group, which a SIGKILL at
# once left running under init; and, a subreaper, it kills the groups of the orphans sent
# to it (that command, where it ignored SIGTERM past its own launcher's wait). Its exit
# status, or the signal that killed it, is the command's (a signal re-raised, without a
# core file of the launcher's own).
# Arguments: the parent's pid, the folder ("": none), the command.
SUPERVISE_SOURCE = """\
import ctypes, os, shutil, signal, sys, time
parent, folder, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
pid = 0
def group_gone():  # within 1 s, the dead reaped (the command; orphans, sent here): no zombie holds the group
    for _ in range(50):
        time.sleep(0.02)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]: pass
        except OSError: pass
        try: os.killpg(pid, 0)
        except OSError: return True
    return False
def end_group():  # SIGTERM first: a launcher like this one inside ends its own group (SIGKILL left it running)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try: os.killpg(pid, sig)
        except OSError: break
        if group_gone(): break
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:  # orphans sent here in groups of their
        try:  # own (an inner launcher's command, its launcher killed before it ended it): those groups too
            if entry.isdigit() and int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                group = os.getpgid(int(entry))
                if group != os.getpgrp(): os.killpg(group, signal.SIGKILL)
        except (OSError, ValueError, IndexError): pass
def parent_died(*_):
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # once: a second signal must not start the wait over
    if pid:
        end_group()
    if folder:
        shutil.rmtree(folder, True)
    os._exit(137)
stops = {signal.SIGTERM} | {s for s in (signal.SIGINT, signal.SIGHUP) if signal.getsignal(s) != signal.SIG_IGN}
for sig in stops:  # one the caller ignores (nohup, a background job) stays ignored, here and in the command
    signal.signal(sig, parent_died)
try:
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)
    ctypes.CDLL(None).prctl(36, 1)  # a subreaper: orphans of the group come here, not to an init that may not reap
except (OSError, AttributeError): pass
if os.getppid() != parent: parent_died()
signal.pthread_sigmask(signal.SIG_BLOCK, stops)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    for sig in stops:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
    try: os.execvp(argv[0], argv)
    except OSError as e:
        print(f"{argv[0]}: {e.strerror}", file=sys.stderr)
        os._exit(127)
try: os.setpgid(pid, pid)
except OSError: pass
signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
status = os.waitpid(pid, 0)[1]
signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # the command's status stands, whatever comes now
end_group()  # what it left running in its group ends with it
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a core file is the command's, not this launcher's
    except (ImportError, OSError, ValueError): pass
    try: signal.signal(sig, signal.SIG_DFL)
    except (OSError, ValueError): pass  # SIGKILL's and SIGSTOP's cannot be set, and need not be
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)
os._exit(os.waitstatus_to_exitcode(status))
"""


def supervised(folder: str) -> list[str]:
    """The launcher for run_command (and oracles/script_run.py's scripts): the command dies,
    with its children, when this process does; `folder` ("": none) is removed then."""
    return [sys.executable, "-I", "-S", "-c", SUPERVISE_SOURCE, str(os.getpid()), folder]
