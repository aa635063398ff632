"""lychee_ray: LycheeMemory V2 long-term memory for LLM agents on Ray Data and Ray Serve."""

__version__ = "0.1.0"
