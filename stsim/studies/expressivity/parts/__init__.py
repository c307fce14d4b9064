"""The six parts of the expressivity study, one module each (``curves``, ``width``,
``seq2seq``, ``trained``, ``patterns``, ``jl``). A part has ``NAME``, ``check(cfg)``,
``design(cfg, seed) -> {table: points}`` (the sweep points of its raw tables, in the order
of its output rows), one point function ``<table>_point`` per table (module level, for
process pools), ``describe(point, result)`` (a progress line), ``analyse(cfg, seed, points,
results)`` (from the tables' results alone) and ``write(cfg, seed, out, analysis,
wall_time_s)`` (its CSV, PNG and JSON; returns its summary)."""
