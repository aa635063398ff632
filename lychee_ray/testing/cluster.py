"""A local multi-node Ray cluster for tests and benchmarks: one head and N worker nodes on this machine.

Every node is a ``ray start --block`` process in its own session (process group), so killing that
group kills the node whole (its raylet, agents and workers), as when a machine dies. Nothing here
imports Ray (the ``testing`` layer must not); the cluster is driven through the ``ray`` CLI and
the dashboard's Jobs REST API (what ``ray job submit`` and ``JobSubmissionClient`` use)::

    with LocalCluster(workers=2, env=s3.env()) as cluster:
        job = cluster.submit(f"python jobs/build_memory.py --input {src} --out {out}", env_vars={...})
        info = cluster.wait(job, timeout_s=120)      # {"status": "SUCCEEDED", ...}
        cluster.kill_worker(0)                       # the node dies (SIGKILL to its process group)

Isolation from any other Ray on the machine (a test session's in-process ``ray.init``, another
developer's cluster): a private ``--temp-dir`` (``ray start`` writes ``ray_current_cluster`` there,
so a plain ``ray.init()`` elsewhere never finds this cluster), ports picked free on 127.0.0.1, and no
``ray stop`` (which would stop every Ray on the machine) — only this cluster's process groups are
killed. Token authentication is off for these throw-away clusters (``RAY_AUTH_MODE=disabled`` in
their environment): a worker started by ``ray start --address`` would otherwise need the head's token.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Environment of every process of a test cluster (the caller's `env` is added on top).
CLUSTER_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "HF_HUB_OFFLINE": "1",  # nothing downloads models at run time
    "TRANSFORMERS_OFFLINE": "1",
    "RAY_COLOR_PREFIX": "0",
    # a killed node is declared dead after ~3 s instead of Ray's default ~15 s (GCS health checks)
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}
TERMINAL_JOB_STATES = {"SUCCEEDED", "FAILED", "STOPPED"}


class ClusterError(RuntimeError):
    """The local cluster did not come up (``kind`` = ``"start"``) or a job call failed (``"job"``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _Node:
    name: str
    proc: subprocess.Popen
    log: Path
    cmd: list[str]
    alive: bool = True
    attempts: int = 1


@dataclass
class LocalCluster:
    """Head + ``workers`` worker nodes on 127.0.0.1, each with a small CPU count and object store.

    ``head_cpus`` defaults to 0 so that tasks and actors run on the worker nodes (the head keeps the
    GCS, the dashboard, the job supervisor and the job's driver); ``worker_cpus`` is what each worker
    node advertises (whole logical CPUs, as ``ray start`` takes them; actors and tasks ask for
    fractions of them: ``ray.stages.<stage>.num_cpus``). ``env`` is added to every node's environment (e.g. ``S3Server.env()``).
    """

    workers: int = 2
    head_cpus: int = 0
    worker_cpus: int = 1
    object_store_mb: int = 96
    env: dict[str, str] = field(default_factory=dict)
    start_timeout_s: float = 120.0
    # `ray start` of a worker gives up when the GCS answers slowly (a loaded 2-core CI machine):
    # such a node is started again, this many times in all
    start_attempts: int = 3
    # one Jobs API call (a submission starts the job's supervisor actor: slow on a loaded machine)
    request_timeout_s: float = 60.0
    ray_bin: str = field(default_factory=lambda: str(Path(sys.executable).with_name("ray")))

    def __post_init__(self) -> None:
        self.temp_dir = ""
        self.gcs_port = 0
        self.dashboard_port = 0
        self.nodes: list[_Node] = []

    # -- addresses ----------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """The GCS address (what ``RAY_ADDRESS`` / ``ray.init(address=...)`` take)."""
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard_url(self) -> str:
        """The dashboard (Jobs API) address: ``ray job submit --address`` / ``RAY_API_SERVER_ADDRESS``."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    def process_env(self) -> dict[str, str]:
        """Environment for a process that talks to this cluster (``ray job submit``, a driver)."""
        return {**os.environ, **CLUSTER_ENV, **self.env, "RAY_ADDRESS": self.address,
                "RAY_API_SERVER_ADDRESS": self.dashboard_url}

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> LocalCluster:
        """Start the head, then the workers; return once every node is alive (ClusterError if not)."""
        # short: Ray's Unix socket paths live under it (107-byte limit)
        self.temp_dir = tempfile.mkdtemp(prefix="lyc-", dir="/tmp")
        self.gcs_port, self.dashboard_port = free_port(), free_port()
        head = [self.ray_bin, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(self.gcs_port),
                "--temp-dir", self.temp_dir, "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
                "--dashboard-port", str(self.dashboard_port), "--ray-client-server-port", str(free_port()),
                "--num-cpus", str(self.head_cpus), "--object-store-memory", str(self.object_store_mb * 2**20),
                "--disable-usage-stats", *self._agent_ports()]
        try:
            self.nodes.append(self._spawn("head", head))
            self._wait_port(self.gcs_port)
            self._wait_dashboard()
            # one worker at a time: nodes on one machine share the session's socket directory, and
            # each `ray start` picks the first free plasma/raylet socket name without creating it,
            # so two starting at once can pick the same one (one raylet then dies: "bind: Address
            # already in use"); a worker counts as started once the cluster lists it alive
            for _ in range(self.workers):
                self.add_worker(wait=True)
            self.wait_nodes(1 + self.workers)
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self, wait: bool = True) -> int:
        """Start one more worker node; returns its index (for :meth:`kill_worker`)."""
        i = sum(1 for n in self.nodes if n.name.startswith("worker"))
        cmd = [self.ray_bin, "start", "--block", "--address", self.address, "--node-ip-address", "127.0.0.1",
               "--num-cpus", str(self.worker_cpus), "--object-store-memory", str(self.object_store_mb * 2**20),
               "--disable-usage-stats", *self._agent_ports()]
        self.nodes.append(self._spawn(f"worker{i}", cmd))
        if wait:
            self.wait_nodes(len(self.alive_nodes()))
        return i

    @staticmethod
    def _agent_ports() -> list[str]:
        """Free ports for a node's agents. The dashboard agent's HTTP port is fixed by default (52365):
        a second node on this machine, or any other Ray here (a test session's own), already holds
        it, and a head whose agent cannot bind is never given jobs ("No available agent")."""
        return ["--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
                "--metrics-export-port", str(free_port()), "--runtime-env-agent-port", str(free_port())]

    def _spawn(self, name: str, cmd: list[str]) -> _Node:
        log = Path(self.temp_dir) / f"{name}.log"
        with open(log, "ab") as f:  # a restarted node appends to its log
            proc = subprocess.Popen(cmd, env={**os.environ, **CLUSTER_ENV, **self.env}, stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        return _Node(name, proc, log, cmd)

    def _wait_port(self, port: int) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            self._check_started()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                time.sleep(0.3)
        raise ClusterError("start", f"the head's GCS did not listen on {port} in {self.start_timeout_s}s; see {self.temp_dir}")

    def _wait_dashboard(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            self._check_started()
            try:
                self._get("/api/version")
                return
            except (OSError, ClusterError):
                time.sleep(0.5)
        raise ClusterError("start", f"the head's dashboard did not answer in {self.start_timeout_s}s; see {self.temp_dir}")

    def _check_started(self) -> None:
        for i, n in enumerate(self.nodes):
            if n.alive and n.proc.poll() is not None:
                tail = n.log.read_text(errors="replace")[-2000:]
                if n.name == "head" or n.attempts >= self.start_attempts:
                    raise ClusterError("start", f"{n.name} exited with {n.proc.returncode}:\n{tail}")
                self._killpg(n)  # whatever it left behind in its group
                again = self._spawn(n.name, n.cmd)
                again.attempts = n.attempts + 1
                self.nodes[i] = again

    def node_table(self) -> list[dict[str, Any]]:
        """The cluster's nodes as the state API lists them (``node_id``, ``state``, ``is_head_node``...)."""
        body = self._get("/api/v0/nodes?limit=1000&detail=true")
        return list(body["data"]["result"]["result"])

    def alive_nodes(self) -> list[_Node]:
        return [n for n in self.nodes if n.alive]

    def wait_nodes(self, count: int) -> list[dict[str, Any]]:
        """Wait until ``count`` nodes are ALIVE; returns them."""
        deadline = time.monotonic() + self.start_timeout_s
        alive: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            self._check_started()
            try:
                alive = [n for n in self.node_table() if n.get("state") == "ALIVE"]
            except (OSError, ClusterError, KeyError):
                alive = []
            if len(alive) >= count:
                return alive
            time.sleep(0.5)
        raise ClusterError("start", f"{len(alive)} of {count} nodes alive after {self.start_timeout_s}s; see {self.temp_dir}")

    def worker_node_ids(self) -> list[str]:
        """Node ids of the alive worker nodes."""
        return sorted(n["node_id"] for n in self.node_table() if n.get("state") == "ALIVE" and not n.get("is_head_node"))

    def node_pids(self) -> dict[str, list[int]]:
        """Process ids of every alive node: its process group (``ray start``, raylet, GCS, agents)
        and every descendant of those — Ray's worker processes (the actors) start process groups
        of their own, so the group alone misses them; the head's also the job supervisors and the
        jobs' drivers. By node name."""
        groups = {n.proc.pid: n.name for n in self.nodes if n.alive}
        out: dict[str, list[int]] = {name: [] for name in groups.values()}
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                pid = int(entry.name)
                try:
                    ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                    name = groups.get(os.getpgid(pid))
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(pid)
                if name is not None:
                    out[name].append(pid)
        for name, members in out.items():
            seen, todo = set(members), list(members)
            while todo:
                for child in children.get(todo.pop(), []):
                    if child not in seen:
                        seen.add(child)
                        todo.append(child)
            out[name] = sorted(seen)
        return out

    def node_rss_bytes(self) -> dict[str, int]:
        """Resident memory of each alive node's processes together (bytes), by node name."""
        page = os.sysconf("SC_PAGE_SIZE")
        out: dict[str, int] = {}
        for name, pids in self.node_pids().items():
            total = 0
            for pid in pids:
                try:
                    total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
                except (OSError, IndexError, ValueError):
                    pass  # ended meanwhile
            out[name] = total
        return out

    def _worker(self, index: int) -> _Node:
        names = [n for n in self.nodes if n.name == f"worker{index}"]
        if not names:
            raise KeyError(f"no worker node {index}")
        return names[0]

    def kill_worker(self, index: int) -> None:
        """Kill worker node ``index`` at once (SIGKILL to its whole process group): no clean shutdown."""
        node = self._worker(index)
        self._killpg(node)

    def _killpg(self, node: _Node) -> None:
        if not node.alive:
            return
        node.alive = False
        try:
            os.killpg(node.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        node.proc.wait(timeout=30)

    def stop(self) -> None:
        """Kill every node (workers first), then remove the temp dir (sessions, logs, spilled objects)."""
        for n in reversed(self.nodes):
            self._killpg(n)
        # processes that left the group (Ray re-parents none of its own, but be thorough about ours)
        self.nodes = []
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- jobs (the dashboard's Jobs REST API) ----------------------------------------------------

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None, timeout_s: float = 30.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.dashboard_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raise ClusterError("job", f"{method} {path}: HTTP {e.code} {e.read()[:500]!r}") from e

    def _get(self, path: str) -> Any:
        return self._request("GET", path)

    def submit(self, entrypoint: str, env_vars: dict[str, str] | None = None, working_dir: str | None = None,
               submission_id: str | None = None) -> str:
        """Submit a job (a shell command run on the head, ``RAY_ADDRESS`` set to this cluster) with a
        ``runtime_env`` of ``env_vars`` (the cluster's own env plus these) and an optional
        ``working_dir`` (a local directory, uploaded); returns its submission id."""
        runtime_env: dict[str, Any] = {"env_vars": {**CLUSTER_ENV, **self.env, **(env_vars or {})}}
        if working_dir:
            runtime_env["working_dir"] = working_dir
        # Always our own id: a request that timed out on our side may still have started the job, and
        # the id tells a retry whether it did (a second job would build the same store concurrently).
        submission_id = submission_id or f"lyc-{uuid.uuid4().hex[:12]}"
        body: dict[str, Any] = {"entrypoint": entrypoint, "runtime_env": runtime_env, "submission_id": submission_id}
        # Right after start (or on a busy machine) the head's job agent may not be registered yet; the
        # Jobs API then answers 500 "No available agent ... try again later" (it waits only 10 s for
        # the agent): try again, as it says, for up to start_timeout_s.
        deadline = time.monotonic() + self.start_timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                return str(self._request("POST", "/api/jobs/", body, timeout_s=self.request_timeout_s)["submission_id"])
            except ClusterError as e:
                if "No available agent" not in str(e):
                    raise
                last = e
            except OSError as e:  # our side timed out (URLError/socket timeout): did the job start?
                last = e
                try:
                    if self.job(submission_id).get("status"):
                        return submission_id
                except (OSError, ClusterError):
                    pass
            time.sleep(1.0)
        raise ClusterError("job", f"could not submit after {self.start_timeout_s}s: {last}\n"
                                  f"head's dashboard agent log:\n{self._log_tail('dashboard_agent.log')}")

    def _log_tail(self, name: str, chars: int = 3000) -> str:
        """The end of a session log of this cluster (``<temp-dir>/session_latest/logs/<name>``)."""
        path = Path(self.temp_dir) / "session_latest" / "logs" / name
        try:
            return path.read_text(errors="replace")[-chars:]
        except OSError as e:
            return f"({path}: {e})"

    def job(self, submission_id: str) -> dict[str, Any]:
        """The job's record (``status``, ``message``, ...)."""
        return dict(self._get(f"/api/jobs/{submission_id}"))

    def logs(self, submission_id: str) -> str:
        """The job driver's output so far."""
        return str(self._get(f"/api/jobs/{submission_id}/logs").get("logs", ""))

    def stop_job(self, submission_id: str) -> None:
        self._request("POST", f"/api/jobs/{submission_id}/stop")

    def wait(self, submission_id: str, timeout_s: float) -> dict[str, Any]:
        """Wait for the job to end (SUCCEEDED, FAILED, STOPPED); ClusterError on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            info = self.job(submission_id)
            if info.get("status") in TERMINAL_JOB_STATES:
                return info
            time.sleep(0.5)
        raise ClusterError("job", f"job {submission_id} still running after {timeout_s}s:\n{self.logs(submission_id)[-3000:]}")
