"""A real S3-compatible server on 127.0.0.1 for tests and benchmarks (moto's threaded server).

The store code reaches it through the same ``pyarrow.fs.S3FileSystem`` path as production; only the
endpoint differs, and it is given the standard way (``AWS_ENDPOINT_URL`` and the AWS credential
variables, which :meth:`S3Server.env` returns and :meth:`S3Server.export` sets)::

    with S3Server() as s3:
        s3.export()                       # AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ... for this process
        uri = s3.bucket("memory")         # creates the bucket, returns "s3://memory"
        build_memory(..., out=f"{uri}/locomo")

Child processes (``ray start``, ``ray job submit``, Serve replicas) get the same variables through
their environment or a Ray ``runtime_env``. moto 5.2.1 answered CompleteMultipartUpload with a
wrong root tag that pyarrow rejects (getmoto/moto#10055); the ``dev`` extra requires a fixed one.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs


@dataclass(frozen=True)
class S3Request:
    """One request the server answered, as the store's cost model sees it."""

    kind: str  # LIST, HEAD, GET, PUT, POST, DELETE
    bucket: str
    key: str  # the object key ('' for bucket-level requests)
    prefix: str | None = None  # the prefix of a LIST


class S3Server:
    """moto's S3 server on 127.0.0.1:<free port>, started and stopped with ``with``."""

    REGION = "us-east-1"
    ACCESS_KEY = "lychee-test"
    SECRET_KEY = "lychee-test-secret"

    def __init__(self, log_requests: bool = False) -> None:
        """``log_requests``: keep every request (:meth:`requests`); counts by kind are always kept."""
        from moto.server import ThreadedMotoServer  # test-only dependency (the dev extra)

        import logging

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""
        self._log_requests = log_requests
        self._log: list[S3Request] = []
        self._counts: Counter[str] = Counter()
        self._log_lock = threading.Lock()

    def start(self) -> S3Server:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        # Record every request (for tests of how many round trips, and which listings, an operation
        # costs): wrap the WSGI app of moto's werkzeug server, which it looks up per request.
        wsgi = self._server._server
        assert wsgi is not None  # (start() made it)
        inner = wsgi.app

        def app(environ: dict[str, Any], start_response: Any) -> Any:
            self._record(environ)
            return inner(environ, start_response)

        wsgi.app = app
        return self

    def _record(self, environ: dict[str, Any]) -> None:
        method = environ.get("REQUEST_METHOD", "")
        bucket, _, key = environ.get("PATH_INFO", "").lstrip("/").partition("/")
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        listing = method == "GET" and not key and ("list-type" in query or "prefix" in query or "delimiter" in query)
        req = S3Request(kind="LIST" if listing else method, bucket=bucket, key=key,
                        prefix=(query.get("prefix") or [""])[0] if listing else None)
        with self._log_lock:
            self._counts[req.kind] += 1
            if self._log_requests:
                self._log.append(req)

    def requests(self, clear: bool = False) -> list[S3Request]:
        """The requests answered since the start (or the last ``clear``), in arrival order
        (only with ``log_requests=True``)."""
        with self._log_lock:
            out = list(self._log)
            if clear:
                self._log.clear()
        return out

    def request_counts(self) -> dict[str, int]:
        """Requests answered since the start, by kind (LIST, HEAD, GET, PUT, POST, DELETE)."""
        with self._log_lock:
            return dict(self._counts)

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point any S3 client (pyarrow, boto3) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY,
            "AWS_DEFAULT_REGION": self.REGION,
            "AWS_REGION": self.REGION,
            # pyarrow would otherwise query the EC2 metadata service for a region (no network here)
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def export(self) -> None:
        """Set :meth:`env` in this process's environment."""
        os.environ.update(self.env())

    def filesystem(self) -> Any:
        """A ``pyarrow.fs.S3FileSystem`` on this server (allowed to create and delete buckets)."""
        import pyarrow.fs as pafs

        host = self.endpoint.removeprefix("http://")
        return pafs.S3FileSystem(access_key=self.ACCESS_KEY, secret_key=self.SECRET_KEY, region=self.REGION,
                                 endpoint_override=host, scheme="http", allow_bucket_creation=True,
                                 allow_bucket_deletion=True)

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` (if absent) and return its URI ``s3://name``."""
        fs = self.filesystem()
        fs.create_dir(name)
        return f"s3://{name}"

    def list_keys(self, uri: str) -> list[str]:
        """Every object key under ``s3://bucket/prefix`` (for assertions on what was written)."""
        import pyarrow.fs as pafs

        path = uri.removeprefix("s3://").rstrip("/")
        infos = self.filesystem().get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
        return sorted(i.path for i in infos if i.type == pafs.FileType.File)
