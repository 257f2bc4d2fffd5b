"""Stopping a run cleanly.

**Stop signals.** While :meth:`TrainingLoop.run` trains, SIGTERM and SIGINT (Ctrl-C) do not kill the
run: the current update finishes, every process agrees on the stop (a flag max-reduced across
processes before each update, so DDP ranks stop at the same step), a checkpoint is written and
logged, and :class:`TrainingInterrupted` is raised. It is a ``SystemExit`` with status
``128 + signal number`` — **143 for SIGTERM, 130 for SIGINT**, the shell's "terminated by this
signal" — so a script exits with that status without a traceback, a scheduler sees a stopped (not a
finished) job, ``train && push`` does not go on, and the final model is not written. Run the same
command again with ``--resume_from_checkpoint latest`` to continue exactly. A second identical
signal while stopping falls back to the previous handler (a second Ctrl-C raises
``KeyboardInterrupt`` at once). The previous handlers are restored when ``run`` ends. Under
``accelerate launch``/``torchrun`` the launcher forwards SIGTERM/SIGINT to its workers (and kills
them 30 s later), so one signal to the launcher is enough; the launcher reports the workers' status
as a failure with its own non-zero status.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from accelerate.logging import get_logger

logger = get_logger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingInterrupted(SystemExit):
    """Training stopped by a signal after writing a checkpoint; exits with status ``128 + signum``
    (143 for SIGTERM, 130 for SIGINT) when not caught."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None):
        super().__init__(128 + signum)
        self.signum, self.step, self.checkpoint = signum, step, checkpoint

    def __str__(self) -> str:
        return (f"Training stopped by {signal.Signals(self.signum).name} after step {self.step}; checkpoint "
                f"{self.checkpoint} (exit status {self.code})")


class StopSignals:
    """Records SIGTERM/SIGINT instead of dying, while active (see the module docstring).

    ``received`` is the last signal number caught (0 if none). A second identical signal calls the
    previous handler. Outside the main thread (where handlers cannot be installed) it does nothing.
    """

    def __init__(self, signals: tuple[int, ...] = STOP_SIGNALS):
        self.signals, self.received, self.previous = signals, 0, {}

    def _handle(self, signum, frame) -> None:
        if self.received == signum:  # asked twice: give up on a clean stop
            previous = self.previous.get(signum)
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
            signal.raise_signal(signum)
            return
        self.received = signum
        logger.warning(f"Received {signal.Signals(signum).name}: stopping after the current update "
                       "(send it again to stop at once).", main_process_only=False)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self.previous = {}


__all__ = ["STOP_SIGNALS", "StopSignals", "TrainingInterrupted"]
