"""The `mtkit translate` stage: plain lines (lines.py: streaming, chunks, resume, n-best and JSON
output), gettext catalogs and HTML pages whole and plain lines with their placeholders kept
(protected.py, over mtkit.formats), and the merging of shard outputs (shards.py).
"""

from mtkit.translate.lines import OutputOptions, parse_shard, read_input, run_translate
from mtkit.translate.shards import SIDECAR, merge_shard_outputs

__all__ = ["SIDECAR", "OutputOptions", "merge_shard_outputs", "parse_shard", "read_input", "run_translate"]
