"""A host on a network of its own, to cut from the database without a sound.

`Netns()` makes a network namespace with two veth pairs to the root namespace:

    database link   10.213.N.1/30 (root: PostgreSQL listens here)  <->  10.213.N.2/30 (inside)
    web link        10.213.N.5/30 (root: clients, webhook receiver) <->  10.213.N.6/30 (inside)

`partition()` puts a `blackhole` qdisc on both ends of the database link: every packet
either way is dropped in silence (no RST, no ICMP), as when a host falls off the network;
`heal()` takes them away. The web link stays up, as the load balancer's would, so what the
cut host answers its clients can be measured. `NetnsInstance` runs gunicorn inside (`ip
netns exec`, a process group of its own, as tests/harness/faultkit.GroupInstance).

`close()` deletes the namespace and the veths, also on failure; a namespace left by a run
that was killed (its owner pid is in the name) is deleted by the next one.
"""

import atexit
import contextlib
import os
import re
import subprocess
import time

from tests.harness.cluster import BIN, ROOT
from tests.harness.faultkit import GroupInstance
from webapp.leadership.files import pid_alive

PREFIX = "soloist-nf"
NAME = re.compile(rf"^{PREFIX}(\d+)-(\d+)$")


class NetnsError(RuntimeError):
    """ip or tc refused (no root, no veth, no blackhole qdisc)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, timeout=20)
    if check and result.returncode != 0:
        raise NetnsError(f"{' '.join(args)}: {result.stderr.strip()}")
    return result


def _namespaces() -> list[str]:
    listed = _ip("ip", "netns", "list", check=False).stdout.split("\n")
    return [line.split()[0] for line in listed if line.strip()]


def remove_stale() -> list[str]:
    """Delete the namespaces and veths of runs whose process is gone; return their names."""
    removed = []
    for name in _namespaces():
        match = NAME.match(name)
        if match and not pid_alive(int(match.group(2))):
            _delete(name, int(match.group(1)))
            removed.append(name)
    return removed


def _delete(name: str, index: int) -> None:
    _ip("ip", "netns", "del", name, check=False)
    for link in (f"snf{index}h", f"snw{index}h"):  # gone with their peers, unless half-made
        _ip("ip", "link", "del", link, check=False)


def _free_index() -> int:
    used = _ip("ip", "-o", "addr", check=False).stdout
    taken = {int(m.group(1)) for name in _namespaces() if (m := NAME.match(name))}
    for index in range(1, 250):
        if index not in taken and f"10.213.{index}." not in used:
            return index
    raise NetnsError("no free 10.213.N.0/24 for a network namespace")


class Netns:
    """One network namespace, linked to the root one by a database and a web veth pair."""

    def __init__(self) -> None:
        remove_stale()
        self.index = _free_index()
        self.name = f"{PREFIX}{self.index}-{os.getpid()}"
        n = self.index
        self.db_host, self.db_inner = f"10.213.{n}.1", f"10.213.{n}.2"
        self.web_host, self.web_inner = f"10.213.{n}.5", f"10.213.{n}.6"
        self.db_link, self.web_link = f"snf{n}", f"snw{n}"
        self.partitioned = False
        atexit.register(self.close)
        try:
            _ip("ip", "netns", "add", self.name)
            self.inside("ip", "link", "set", "lo", "up")
            self._pair(self.db_link, self.db_host, self.db_inner)
            self._pair(self.web_link, self.web_host, self.web_inner)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Netns":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _pair(self, link: str, host: str, inner: str) -> None:
        _ip("ip", "link", "add", f"{link}h", "type", "veth", "peer", "name", f"{link}n")
        _ip("ip", "link", "set", f"{link}n", "netns", self.name)
        _ip("ip", "addr", "add", f"{host}/30", "dev", f"{link}h")
        _ip("ip", "link", "set", f"{link}h", "up")
        self.inside("ip", "addr", "add", f"{inner}/30", "dev", f"{link}n")
        self.inside("ip", "link", "set", f"{link}n", "up")

    def inside(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a command in the namespace."""
        return _ip("ip", "netns", "exec", self.name, *args, check=check)

    def partition(self) -> float:
        """Drop every packet on the database link, both ways; return the time just before."""
        at = time.time()
        _ip("tc", "qdisc", "add", "dev", f"{self.db_link}h", "root", "blackhole")
        self.inside("tc", "qdisc", "add", "dev", f"{self.db_link}n", "root", "blackhole")
        self.partitioned = True
        return at

    def heal(self) -> float:
        """Take the blackholes away; return the time just after."""
        _ip("tc", "qdisc", "del", "dev", f"{self.db_link}h", "root", check=False)
        self.inside("tc", "qdisc", "del", "dev", f"{self.db_link}n", "root", check=False)
        self.partitioned = False
        return time.time()

    def close(self) -> None:
        """Delete the namespace and its veths (idempotent)."""
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        _delete(self.name, self.index)


class NetnsInstance(GroupInstance):
    """A gunicorn instance inside netns: it reaches PostgreSQL on the database link and
    is reached on the web link."""

    def __init__(self, netns: Netns, *args: object, **kwargs: object) -> None:
        self.netns = netns
        super().__init__(*args, **kwargs)

    @property
    def url(self) -> str:
        return f"http://{self.netns.web_inner}:{self.port}"

    def start(self) -> "NetnsInstance":
        self.log = open(self.log_path, "w")  # noqa: SIM115  (closed in stop)
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns.name, str(BIN / "gunicorn"), "-c",
             "webapp/gunicorn_conf.py", "webapp:create_app()"],
            cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.started = time.time()
        return self
