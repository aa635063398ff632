"""Ray job entry point for memory construction (same job as ``lychee-ray build``).

    ray job submit --working-dir . -- python jobs/build_memory.py --input DATA --format jsonl --out STORE
"""

import sys

from lychee_ray.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["build", *sys.argv[1:]]))
