"""One bash process per page, so that what a reader types carries over from one command to the
next as in their terminal: ``cd``, ``export``, shell variables, a server started with ``&``.

Each command is written to a script outside the page's working directory and sourced with
stdin from /dev/null (a command that reads stdin must not swallow the commands after it);
stdout and stderr share one pipe, in the order the program wrote them (``PYTHONUNBUFFERED``).
The process group is killed at the end, background servers included.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
import uuid
from pathlib import Path


class CommandTimeout(Exception):
    pass


class Shell:
    def __init__(self, cwd: Path, scripts: Path, env: dict[str, str]) -> None:
        self.scripts = scripts
        self.mark = f"__docs_step_done_{uuid.uuid4().hex}__"
        self.count = 0
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._buffer = b""
        self.run("set -o pipefail", timeout=10)

    def run(self, text: str, timeout: float) -> tuple[str, int]:
        """Run ``text`` (one command, or a script) and return what it printed and its exit
        code."""
        self.count += 1
        script = self.scripts / f"step-{self.count:03d}.sh"
        script.write_text(text + "\n", encoding="utf-8")
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(
            f"source {script} </dev/null\nprintf '\\n{self.mark} %d\\n' $?\n".encode()
        )
        self.process.stdin.flush()
        needle = f"\n{self.mark} ".encode()
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while needle not in self._buffer or not self._buffer.split(needle, 1)[1].count(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise CommandTimeout(f"no end after {timeout:.0f} s: {text}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise CommandTimeout(f"bash exited while running: {text}")
                self._buffer += chunk
        output, rest = self._buffer.split(needle, 1)
        code, self._buffer = rest.split(b"\n", 1)
        return output.decode("utf-8", "replace"), int(code)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
