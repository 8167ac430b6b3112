"""Stack bytes each probe native uses, measured by painting the stack.

Run under gdb (the gdb Python API):

  crates/agent/bench/probe-stack.sh [AGENT_SO]

At the entry of each probe native (the first CALLS hits in all) it fills
96 KiB below the stack pointer with a pattern, stops again when the native
returns to its caller, and takes the lowest byte that was overwritten: the
stack the call used, its own frame and everything it called (Rust, libc,
JNI and JVMTI calls into the JVM). Prints the most per native. HotSpot
keeps StackShadowPages (20 pages, 80 KiB on Linux x86-64) free below
every Java frame for native calls, so a probe that stays well under that
never costs the program a frame of recursion depth.
"""
import os

import gdb

SPAN = 96 * 1024
PATTERN = b"\xa5" * SPAN
CALLS = int(os.environ.get("CALLS", "400"))
NATIVES = ["enter", "exit", "exit_int", "exit_long", "exit_object", "exit_throw",
           "arg_int", "arg_long", "arg_object", "monitor_enter", "monitor_exit"]

gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set breakpoint pending on")
# The JVM uses these signals itself.
for sig in ["SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGQUIT", "SIGUSR2"]:
    gdb.execute(f"handle {sig} nostop noprint pass")

most = {}
hits = [0]


class Return(gdb.Breakpoint):
    """The caller's next instruction, on the same thread: measure, then off."""

    def __init__(self, addr, name, sp, cfa):
        super().__init__(f"*0x{addr:x}", internal=True)
        self.thread = gdb.selected_thread().num
        self.name, self.sp, self.cfa = name, sp, cfa

    def stop(self):
        mem = bytes(gdb.selected_inferior().read_memory(self.sp - SPAN, SPAN))
        untouched = 0
        while untouched < SPAN and mem[untouched] == 0xA5:
            untouched += 1
        used = SPAN - untouched + (self.cfa - self.sp)
        self.enabled = False
        m = most.setdefault(self.name, [0, 0])
        m[0] = max(m[0], used)
        m[1] += 1
        return False


class Entry(gdb.Breakpoint):
    def stop(self):
        if hits[0] >= CALLS:
            self.enabled = False
            return False
        hits[0] += 1
        frame = gdb.selected_frame()
        while frame.type() == gdb.INLINE_FRAME:
            frame = frame.older()
        name = frame.function().name if frame.function() else "?"
        sp = int(gdb.selected_frame().read_register("rsp"))
        caller = frame.older()
        gdb.selected_inferior().write_memory(sp - SPAN, PATTERN)
        Return(caller.pc(), name, sp, int(caller.read_register("rsp")))
        return False


# FUNCS="a::b c::d" measures those functions instead (full Rust paths).
for n in os.environ.get("FUNCS", "").split() or [
        "vmview_agent::capture::probe_natives::" + n for n in NATIVES]:
    Entry(n)


def report(_event):
    for name, (used, calls) in sorted(most.items()):
        print(f"{name.rsplit('::', 1)[-1]:<14} {used:>7} bytes at most over {calls} calls")


gdb.events.exited.connect(report)
gdb.execute("run")
