"""Recording: the one home where collectors become runs (and their cursors) for every sink.

``recording`` (one run in the making), ``profile`` (``daskprofile.profile()``), ``per_cell``
(the panel's always-on recording), ``history`` (runs being recorded and kept), ``cursors``
(incremental readers of a run), ``clusters`` (``distributed``, only once it is in use),
``cluster_progress`` (what the progress bars count of a cluster's graphs).
Nothing below this package imports it; ``jupyter/`` and the command line sit above it.

Submodules are imported by name (``from daskprofile.record.history import history``): the
package re-exports nothing, so no name here hides a submodule.
"""
