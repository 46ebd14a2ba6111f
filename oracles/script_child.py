"""The part of a repro script that runs the bug in a child process, for bugs that kill or
hang the process (repro.py and repro_tensorrt.py share it).

The child prints CALL_MARK when it calls the backend: an end before that (a file gone, a
broken import) is the script's and exits 2, "cannot run"; only an end after it is judged
as the bug. The script defines CHILD_TIMEOUT_S, HANG_VERDICT (line, exit code) and
DEATH_PATTERN (a regex for how the reduced bug ended the process, e.g. SIGSEGV).
"""

CHILD_SOURCE = '''
CALL_MARK = "TRTMIN_CHILD: calling the backend"
VERDICTS = {0: "FIXED", 1: "REPRODUCED", 2: "SKIPPED", 3: "CHANGED"}
SETUP_TIMEOUT_S = 600  # the child's start-up, before the call: a stuck one is no verdict either


def last_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def how_it_ended(returncode):
    if returncode < 0:
        import signal
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def announce_call():
    """In the child, just before the backend is called: from here on, how this process
    ends is the backend's doing."""
    if os.environ.get("TRTMIN_CHILD"):
        print(CALL_MARK, flush=True)


def run_in_child():
    """The bug kills or hangs the process: run it in a child and read how it ended. The
    clock starts at the child's mark: its start-up (torch's import, the inputs) is no hang."""
    import tempfile
    import threading

    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen([sys.executable, __file__], env={**os.environ, "TRTMIN_CHILD": "1"},
                                 stdout=subprocess.PIPE, stderr=err, text=True)
        lines, called, done, progress = [], threading.Event(), threading.Event(), threading.Event()

        def read():  # a thread, so that no output fills the pipe while the clock runs
            for line in child.stdout:
                if line.rstrip("\\n") == CALL_MARK:
                    called.set()
                    progress.set()
                else:
                    lines.append(line)
            done.set()
            progress.set()

        threading.Thread(target=read, daemon=True).start()
        if not progress.wait(SETUP_TIMEOUT_S):
            child.kill()
            print(f"SKIPPED: cannot run: the child process did not reach the backend call in {SETUP_TIMEOUT_S:g} s")
            return 2
        try:
            child.wait(timeout=CHILD_TIMEOUT_S if called.is_set() else None)
        except subprocess.TimeoutExpired:
            child.kill()
            print(HANG_VERDICT[0])
            return HANG_VERDICT[1]
        done.wait(5)  # the rest of stdout (a grandchild may hold the pipe: not for ever)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    out = "".join(lines)
    said = last_line(out)
    if child.returncode in VERDICTS and said.startswith(VERDICTS[child.returncode] + ":"):
        sys.stdout.write(out)  # the child ran to a verdict of its own
        return child.returncode
    ended = how_it_ended(child.returncode)
    if not called.is_set():
        sys.stderr.write(stderr[-3000:])
        print(f"SKIPPED: cannot run: the child process {ended} before it called the backend: "
              f"{last_line(stderr) or 'no error message'}")
        return 2
    sys.stdout.write(out)
    if re.search(DEATH_PATTERN, ended):
        print(f"REPRODUCED: the process {ended}")
        return 1
    sys.stderr.write(stderr[-3000:])
    print(f"CHANGED: the process {ended}")
    return 3

'''
