"""The command line: click only. It parses arguments, calls :class:`crs.Benchmark` or a subpackage,
prints, and turns library errors into one-line ``crs: error:`` messages."""
