"""CPU seconds and peak memory from /proc, read around a load.

Takes process ids; returns seconds or megabytes. `measure` wraps one load: it reads the CPU of
the server, of PostgreSQL (the postmaster and its children), of the load generator (this
process's reaped children) and of the whole machine before and after, and adds the differences
and the server's peak RSS to the load's figures under the schema's names.
"""

import glob
import os
import resource

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    return data[data.rindex(")") + 2:].split()  # after the command name, which may hold spaces


def proc_cpu_seconds(pid):
    """User and system CPU seconds of one process."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pg_cpu_seconds(postmaster):
    """CPU seconds of PostgreSQL: the postmaster with its reaped children (backends that ended)
    plus every live child."""
    total = 0
    for stat in glob.glob("/proc/[0-9]*/stat"):
        pid = int(stat.split("/")[2])
        try:
            fields = _stat_fields(pid)
        except (OSError, ValueError):
            continue
        if pid == postmaster:
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        elif int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def busy_cpu_seconds():
    """Non-idle CPU seconds of the whole machine (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    guest = sum(v[8:10]) if len(v) > 9 else 0  # already counted in user and nice
    return (sum(v) - idle - guest) / CLK_TCK


def children_cpu_seconds():
    """CPU seconds of this process's children that have ended: the load generators."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def peak_rss_mb(pid):
    """Peak resident memory (VmHWM) of a process, in MB; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def measure(load_fn, server_pid=None, postmaster=None):
    """Runs load_fn() (which returns a load's figures) and adds the CPU seconds spent meanwhile
    by the server, PostgreSQL, the load generator and everything else, and the server's peak RSS."""
    def server_cpu():
        try:
            return proc_cpu_seconds(server_pid) if server_pid else None
        except OSError:  # it exited; the caller reports that
            return None

    def read():
        return (server_cpu(),
                pg_cpu_seconds(postmaster) if postmaster else None,
                children_cpu_seconds(), busy_cpu_seconds())

    before = read()
    load = load_fn()
    after = read()
    diff = [None if a is None or b is None else b - a for a, b in zip(before, after)]
    load.update(server_cpu_s=diff[0], db_cpu_s=diff[1], loadgen_cpu_s=diff[2])
    known = sum(x for x in diff[:3] if x is not None)
    load["other_cpu_s"] = diff[3] - known  # other processes on the host: noise
    if server_pid:
        load["peak_rss_mb"] = peak_rss_mb(server_pid)
    return load
