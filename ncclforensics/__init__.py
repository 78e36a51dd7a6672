"""ncclforensics: find where the ranks of a distributed GPU job stopped agreeing, and what it cost."""

__version__ = "0.1.0"
