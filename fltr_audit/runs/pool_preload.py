"""What the local pool's fork server (``runs.executors``) imports once, before it forks the workers:
the run code every task calls -- campaign runs, whole-run canary runs, unlearning audits -- so a
worker starts without importing numpy, scipy, pandas, scikit-learn and numba again (about 1.5 s of
CPU each when every worker was a fresh interpreter). The imported objects are then frozen out of
the garbage collector: a forked worker's full collection would otherwise visit, and so copy, every
page it inherited."""

import gc

import fltr_audit.runs.campaign  # noqa: F401 -- and through it runs.whole_run and runs.unlearning

gc.freeze()
