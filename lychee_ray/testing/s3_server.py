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
from typing import Any


class S3Server:
    """moto's S3 server on 127.0.0.1:<free port>, started and stopped with ``with``."""

    REGION = "us-east-1"
    ACCESS_KEY = "lychee-test"
    SECRET_KEY = "lychee-test-secret"

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer  # test-only dependency (the dev extra)

        import logging

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def start(self) -> "S3Server":
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> "S3Server":
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
